"""The Z3 backend: proofs over the rule IR (robust verdicts, explanations, lint)."""

"""Formal checks with Z3, one module per concern: ``robust`` (tolerance-robust verdicts,
``check --robust``), ``explain`` (minimal failing cores) and ``lint`` (rule-set
consistency); ``common`` holds what they share. Import from the concern's module.
"""

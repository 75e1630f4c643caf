"""The cellspec language server (``cellspec lsp``): a tool layer over dsl, solver and testing.

``index`` scans a document's text (half-typed files included) for declarations and
references; ``diagnose`` runs the real loader for the CLI's diagnostics; ``server`` wires
both into pygls. Nothing below this package imports it.
"""

"""Formal checks with Z3, one module per concern: ``robust`` (tolerance-robust verdicts,
``check --robust``), ``explain`` (minimal failing cores) and ``lint`` (rule-set
consistency); ``common`` holds what they share.

The robust API is re-exported here for the importers that predate the split
(``cellspec.testing.runner``); new code imports from the concern's module.
"""

from cellspec.solver.formal.common import DEFAULT_TIMEOUT, STABILITY_RELATIONS
from cellspec.solver.formal.robust import prove_robust, validate_tolerance

__all__ = ["DEFAULT_TIMEOUT", "STABILITY_RELATIONS", "prove_robust", "validate_tolerance"]

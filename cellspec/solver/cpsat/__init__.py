"""OR-Tools backends: complete assembly sequencing (:mod:`.sequence`) and minimal-change
repair on the integer grid (:mod:`.repair`).

Both read the same :class:`~cellspec.solver.instance.Instance` integers (units U =
0.05 mm) as the clingo verifier, and every answer they give is re-verified with
:func:`cellspec.solver.verify.check` before it is reported as a success.
"""

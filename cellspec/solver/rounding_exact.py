"""Deciding the rules the 0.1 mm rounding decides on the layout as written, exactly.

When the rounding analysis (:mod:`cellspec.solver.rounding`) finds that a relation or an
attribute comparison the rules read changes between the grid and the layout as written,
the rules reading it are re-decided here by the reference evaluator on the exact integers
(the positions and sizes as the decimals written, on a grid ``scale`` times finer than U;
the cell's tolerance, zones, surfaces and gripper sizes scaled with it). Only for
axis-aligned boxes (a yaw's corners are irrational), small layouts (the reference is brute
force) and rules that do not read stability (the LP is built on the grid); otherwise
verify answers ``unknown``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import ir, relations
from cellspec.dsl.model import Rule
from cellspec.solver.instance import Instance, lin_to_int
from cellspec.solver.reference import ReferenceEvaluator, _compare
from cellspec.solver.rounding import cell_lengths, exact_boxes, exact_surface, exact_zone

MAX_EXACT_PARTS = 200  # the reference evaluator is brute force
NOT_EXACT = relations.names(lambda r: r.lp)


class _Scaled(ReferenceEvaluator):
    """The reference evaluator on an instance whose lengths are ``scale`` times finer than
    U (comparison constants and ``near`` distances are scaled to match)."""

    def __init__(self, inst: Instance, scale: int):
        super().__init__(inst)
        self.scale = scale

    def cmp(self, node: ir.Cmp, env: dict[str, object]) -> bool:
        coefs, const = lin_to_int([(a.attr, c) for a, c in node.expr.terms], node.expr.const)
        total = const * self.scale
        for (a, _), k in zip(node.expr.terms, coefs, strict=True):
            total += k * int(self.attr(a.attr)[env[a.var]])  # type: ignore[call-overload]
        return _compare(total, node.op, 0)

    def rel(self, node: ir.Rel, env: dict[str, object]) -> bool:
        if node.name == "near":
            args: list[Any] = [env[a.name] if isinstance(a, ir.VarArg) else a
                               for a in node.args]
            d = math.floor(g.to_u(args[2].value) * self.scale)
            return bool(self.pair("near", (d,))[args[0], args[1]])
        return super().rel(node, env)


def exact_instance(inst: Instance) -> tuple[Instance, int] | None:
    """The instance with the parts as written on the finer grid, and its scale; None when
    a coordinate has more decimals than the analysis reads."""
    ex = exact_boxes(inst.pos_m, inst.size_m if inst.ksize_m is None else inst.ksize_m,
                     cell_lengths(inst))
    if ex.approx:
        return None
    s = ex.scale

    def sc(t: Any) -> Any:
        return None if t is None else tuple(v * s for v in t)

    zones = {name: exact_zone(inst, name, s) for name in inst.zones}
    reach = {r: g.ReachU(sc(v.base), None if v.reach2 is None else v.reach2 * s * s,
                         sc(v.lo), sc(v.hi))
             for r, v in (inst.reach or {}).items()}
    boxes = ex.boxes.astype(object) if reach else ex.boxes  # squares of long integers
    return dataclasses.replace(
        inst, boxes=boxes, eps=inst.eps * s, zones=zones,
        surfaces={k: exact_surface(inst, k, s) for k in inst.surfaces},
        opening=None if inst.opening is None else inst.opening * s,
        depth=None if inst.depth is None else inst.depth * s, reach=reach, shapes=None,
        off_grid=False), s


def exact_violations(inst: Instance, rules: Sequence[Rule]
                     ) -> dict[str, list[tuple[object, ...]]] | None:
    """Each rule's violating bindings (as the backends give them) on the layout as
    written, or None when it cannot be decided exactly here (see the module docstring)."""
    # the exact rational re-decision is defined on boxes only (docs/shapes.md): the kernel
    # says whether it applies
    if not inst.kernel().exact_on_grid or inst.n > MAX_EXACT_PARTS:
        return None
    if any(ir.uses_relation(r.body, NOT_EXACT) for r in rules):
        return None
    built = exact_instance(inst)
    if built is None:
        return None
    ref = _Scaled(*built)
    out = {}
    for r in rules:
        found = ref.violations(r)
        out[r.name] = [tuple(int(x) if isinstance(x, np.integer) else x for x in b)
                       for b in found]
    return out

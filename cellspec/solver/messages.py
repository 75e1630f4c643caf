"""Render a rule's message template for one violation, with the numbers that matter.

Placeholders: ``{p}`` (a part id or zone name), ``{p.top}`` (an attribute, metres),
``{overlap(p, q)}``, ``{gap(p)}``, ``{outside(p)}``, ``{intrusion(p, k)}``. The
numbers come from the layout as given (floats, metres), not from the grid.
"""

from __future__ import annotations

import re

import numpy as np

from cellspec.solver import geometry as g
from cellspec.solver.instance import BoxU, Instance

PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
U = float(g.U)


def _m(v: float) -> str:
    return f"{v:.3f} m"


class MessageContext:
    """Per-check helper holding float boxes so many messages stay cheap."""

    def __init__(self, inst: Instance):
        self.inst = inst
        half = inst.size_m / 2
        self.lo = inst.pos_m - half
        self.hi = inst.pos_m + half

    def render(self, template: str, env: dict[str, int | str]) -> str:
        def sub(m: re.Match[str]) -> str:
            inner = m.group(1).strip()
            try:
                return self._value(inner, env)
            except (KeyError, IndexError, ValueError):
                return m.group(0)

        return PLACEHOLDER.sub(sub, template)

    def _value(self, inner: str, env: dict[str, int | str]) -> str:
        fm = re.fullmatch(r"(\w+)\(([^()]*)\)", inner)
        if fm:
            args = [env[a.strip()] for a in fm.group(2).split(",") if a.strip()]
            return getattr(self, "f_" + fm.group(1))(*args)
        var, _, attr = inner.partition(".")
        val = env[var]
        if isinstance(val, str):
            return val
        i = int(val)
        if not attr:
            return self.inst.ids[i]
        if attr == "type":
            return self.inst.types[i]
        if attr == "gripper":
            return self.inst.grippers[i]
        return _m(self.attr(i, attr))

    def attr(self, i: int, attr: str) -> float:
        k = "xyz".index(attr[-1]) if attr[-1] in "xyz" else 2
        if attr in ("x", "y", "z"):
            return float(self.inst.pos_m[i, k])
        if attr.startswith("size."):
            return float(self.inst.size_m[i, k])
        if attr in ("top", "zmax", "xmax", "ymax"):
            return float(self.hi[i, k])
        return float(self.lo[i, k])

    def f_overlap(self, i: int, j: int) -> str:
        o = np.minimum(self.hi[i], self.hi[j]) - np.maximum(self.lo[i], self.lo[j])
        k = int(np.argmin(o))
        return f"{_m(float(o[k]))} on {'xyz'[k]}"

    def f_gap(self, i: int) -> str:
        eps = self.inst.eps * U
        bottom = float(self.lo[i, 2])
        tops = [float(z) * U for z in self.inst.surfaces.values() if z * U <= bottom + eps]
        fx = (np.minimum(self.hi[:, 0], self.hi[i, 0]) - np.maximum(self.lo[:, 0], self.lo[i, 0]))
        fy = (np.minimum(self.hi[:, 1], self.hi[i, 1]) - np.maximum(self.lo[:, 1], self.lo[i, 1]))
        under = (fx > eps) & (fy > eps) & (self.hi[:, 2] <= bottom + eps)
        under[i] = False
        if under.any():
            tops.append(float(self.hi[under, 2].max()))
        if not tops:
            if self.inst.surfaces:
                z = min(self.inst.surfaces.values(), key=lambda s: abs(s * U - bottom)) * U
                return f"{_m(z - bottom)} below the surface at z {z:.3f}"
            return "nothing (the cell has no surface)"
        return _m(bottom - max(tops))

    def f_outside(self, i: int) -> str:
        ws = self.inst.zones["workspace"]
        assert isinstance(ws, BoxU)
        worst, text = 0.0, "within the tolerance"
        for k, ax in enumerate("xyz"):
            lo, hi = ws.lo[k] * U, ws.hi[k] * U
            if lo - self.lo[i, k] > worst:
                worst = float(lo - self.lo[i, k])
                text = f"{ax} min {self.lo[i, k]:.3f} m < {lo:.3f} m by {_m(worst)}"
            if self.hi[i, k] - hi > worst:
                worst = float(self.hi[i, k] - hi)
                text = f"{ax} max {self.hi[i, k]:.3f} m > {hi:.3f} m by {_m(worst)}"
        return text

    def f_intrusion(self, i: int, zone: str) -> str:
        z = self.inst.zones[zone]
        if isinstance(z, BoxU):
            lo = np.array(z.lo) * U
            hi = np.array(z.hi) * U
            o = np.minimum(self.hi[i], hi) - np.maximum(self.lo[i], lo)
            return _m(float(o.min()))
        coef = np.array(z.coef, dtype=float)
        ext_hi = float(np.where(coef > 0, coef * self.hi[i], coef * self.lo[i]).sum())
        ext_lo = float(np.where(coef > 0, coef * self.lo[i], coef * self.hi[i]).sum())
        norm = float(np.abs(coef).sum())  # L1: the per-axis push along the worst corner
        rhs = z.rhs
        depth = (ext_hi / U - rhs) if z.op in (">", ">=") else (rhs - ext_lo / U)
        return _m(depth * U / norm)

"""Render a rule's message template for one violation, with the numbers that matter.

Placeholders: ``{p}`` (a part id or zone name), ``{p.top}`` (an attribute, metres),
``{overlap(p, q)}``, ``{gap(p)}``, ``{outside(p)}``, ``{intrusion(p, k)}``. The
numbers come from the layout as given (floats, metres), not from the grid.
"""

from __future__ import annotations

import re

import numpy as np

from cellspec.core import geometry as g
from cellspec.solver.instance import BoxU, Instance
from cellspec.solver.stability import report

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
        self.kernel = inst.kernel()
        self.plain = self.kernel.plain_mask()
        odd = ~self.plain  # yawed boxes and cylinders: their world-axis extent
        if odd.any():
            ex, ey = self.kernel.extent_xy()
            for k, e in ((0, ex), (1, ey)):
                self.lo[odd, k] = inst.pos_m[odd, k] - e[odd] * U
                self.hi[odd, k] = inst.pos_m[odd, k] + e[odd] * U
        self._xorder: np.ndarray | None = None
        self._xsorted = np.empty(0)
        self._maxw = 0.0

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

    def _shaped(self, *parts: int) -> bool:
        """Some of these parts is a yawed box or a cylinder."""
        return not all(bool(self.plain[p]) for p in parts)

    def f_overlap(self, i: int, j: int) -> str:
        o = np.minimum(self.hi[i], self.hi[j]) - np.maximum(self.lo[i], self.lo[j])
        k = int(np.argmin(o))
        tail = " (enclosing boxes)" if self._shaped(i, j) else ""
        return f"{_m(float(o[k]))} on {'xyz'[k]}{tail}"

    def _under(self, i: int) -> np.ndarray:
        """Indices of parts whose footprint overlaps part i's by more than eps.

        Parts are sorted by their low x once; each query scans only the x-slab that can
        reach part i, so many messages on a large layout stay cheap."""
        if self._xorder is None:
            self._xorder = np.argsort(self.lo[:, 0], kind="stable")
            self._xsorted = self.lo[self._xorder, 0]
            self._maxw = float((self.hi[:, 0] - self.lo[:, 0]).max()) if self.inst.n else 0.0
        lo = np.searchsorted(self._xsorted, self.lo[i, 0] - self._maxw, side="left")
        hi = np.searchsorted(self._xsorted, self.hi[i, 0], side="right")
        cand = self._xorder[lo:hi]
        cand = cand[cand != i]
        eps = self.inst.eps * U
        fx = np.minimum(self.hi[cand, 0], self.hi[i, 0]) - np.maximum(self.lo[cand, 0],
                                                                       self.lo[i, 0])
        fy = np.minimum(self.hi[cand, 1], self.hi[i, 1]) - np.maximum(self.lo[cand, 1],
                                                                       self.lo[i, 1])
        out = cand[(fx > eps) & (fy > eps)]
        odd = ~(self.plain[out] & self.plain[i])  # the exact footprints of shaped parts
        if odd.any():
            keep = self.kernel.footprint(out[odd], np.full(int(odd.sum()), i), self.inst.eps)
            odd[odd] = ~keep
            out = out[~odd]
        return out

    def _near(self, i: int) -> np.ndarray:
        """Parts within the gripper's reach of part i along x and y (a superset for flanks:
        the fingers' sweep, turned with a yawed part, leaves its enclosing box by less than
        the reach on either axis; y is given a few eps more against rounding)."""
        if self._xorder is None:
            self._under(i)
        assert self._xorder is not None  # _under sorted the parts
        reach = (self.inst.opening or 0) * U + self.inst.eps * U
        lo = np.searchsorted(self._xsorted, self.lo[i, 0] - self._maxw - reach, side="left")
        hi = np.searchsorted(self._xsorted, self.hi[i, 0] + reach, side="right")
        cand = self._xorder[lo:hi]
        ry = reach + 4 * self.inst.eps * U
        cand = cand[(self.hi[cand, 1] >= self.lo[i, 1] - ry)
                    & (self.lo[cand, 1] <= self.hi[i, 1] + ry)]
        return np.sort(cand[cand != i])

    def f_gap(self, i: int) -> str:
        """Where p's bottom is relative to the nearest thing that could support it."""
        eps = self.inst.eps * U
        bottom = float(self.lo[i, 2])
        best: tuple[float, str] | None = None  # (signed gap, what)
        for name, z in self.inst.surfaces.items():
            gap = bottom - z * U
            if gap >= -eps and (best is None or gap < best[0]):
                best = (gap, f"the {name}")
        under = self._under(i)
        below = under[self.lo[under, 2] < bottom - eps]  # parts lower than p, not above it
        if len(below):
            tops = self.hi[below, 2]
            k = int(np.argmin(np.abs(bottom - tops)))
            gap = bottom - float(tops[k])
            if best is None or abs(gap) < abs(best[0]):
                best = (gap, self.inst.ids[int(below[k])])
        if best is None:
            if self.inst.surfaces:
                name, z = min(self.inst.surfaces.items(), key=lambda s: abs(s[1] * U - bottom))
                return f"{_m(z * U - bottom)} below the {name}"
            return "over nothing (the cell has no surface)"
        gap, what = best
        if gap < 0:
            return f"{_m(-gap)} below the top of {what}, which it sinks into"
        return f"{_m(gap)} above the nearest support ({what})"

    def f_blockers(self, i: int) -> str:
        """Which already-placed parts block p's grip: per lateral axis for a parallel
        gripper, the parts on its top for a vacuum cup (exact integer kernel)."""
        inst = self.inst
        if inst.order_pos is None:
            return "no order given"
        near = self._near(i)
        earlier = near[inst.order_pos[near] < inst.order_pos[i]]
        kern = inst.kernel()
        mine = np.full(len(earlier), i)
        if inst.grippers[i] == "vacuum":
            on_top = earlier[kern.pair("supports", mine, earlier, inst.eps)]
            names = ", ".join(inst.ids[k] for k in on_top) or "nothing"
            return f"its top is covered by {names}"
        parts = []
        for axis in "xy":
            hit = earlier[kern.flanks(earlier, mine, axis, inst.opening, inst.depth,
                                      inst.eps)]  # along i's own axes
            names = ", ".join(inst.ids[k] for k in hit[:4]) + (" …" if len(hit) > 4 else "")
            label = f"its own {axis}" if self._shaped(i) else axis
            parts.append(f"{label} by {names}" if len(hit) else f"{label} free")
        return "blocked along " + " and along ".join(parts)

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

    def f_stability(self, i: int) -> str:
        """Why p topples or slides off what carries it, against the cell's margin."""
        return report(self.inst, stages_too=False).why.get(
            int(i), f"{self.inst.ids[int(i)]} does not stand")

    def f_stages(self, i: int) -> str:
        """The first stage of construction at which p's structure falls."""
        return report(self.inst).stage_why.get(
            int(i), f"the structure {self.inst.ids[int(i)]} joins falls when it is placed")

    def f_intrusion(self, i: int, zone: str) -> str:
        z = self.inst.zones[zone]
        if isinstance(z, BoxU):
            lo = np.array(z.lo) * U
            hi = np.array(z.hi) * U
            o = np.minimum(self.hi[i], hi) - np.maximum(self.lo[i], lo)
            return _m(float(o.min())) + (" (enclosing box)" if self._shaped(i) else "")
        coef = np.array(z.coef, dtype=float)
        ext_hi = float(np.where(coef > 0, coef * self.hi[i], coef * self.lo[i]).sum())
        ext_lo = float(np.where(coef > 0, coef * self.lo[i], coef * self.hi[i]).sum())
        norm = float(np.abs(coef).sum())  # L1: the per-axis push along the worst corner
        rhs = z.rhs
        depth = (ext_hi / U - rhs) if z.op in (">", ">=") else (rhs - ext_lo / U)
        return _m(depth * U / norm) + (" (enclosing box)" if self._shaped(i) else "")

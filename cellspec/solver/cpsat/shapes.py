"""The template structures of ``cellspec generate``: each kind is a pure function of its
parameters and the part size, giving its parts (centre offsets in U from the footprint's
low corner, the bottom at 0, every offset even; gripper or None for the cell's default).
Gravity, contact and grip pattern are known by construction; ``packing`` is not a
template (CP-SAT chooses its columns, :mod:`cellspec.solver.cpsat.generate_model`).

To add a kind: write ``_kind(p, s, along, has_vacuum)`` and register it in ``SHAPES``.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from cellspec.core.errors import CellspecError
from cellspec.dsl.design import StructureSpec

PartT = tuple[int, int, int, str | None]
Size = tuple[int, int, int]


class Infeasible(Exception):
    """A spec that provably cannot be built (arithmetic on the shape, no search needed).

    ``squares``: the bound counts the parts' bounding squares on a lattice (or their
    areas), a proof for boxes only: discs pack tighter than their squares."""

    def __init__(self, reason: str, conflict: tuple[str, ...] = (), squares: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.conflict = conflict
        self.squares = squares


def even(v: float | int | Fraction) -> int:
    """Round to the nearest even integer (centres must lie on the 0.1 mm grid)."""
    return 2 * round(Fraction(v) / 2)


def _grid(cells: list[tuple[int, int, int]], s: Size, grip: Any = None) -> list[PartT]:
    """Parts on the lattice of part size s: (column i, row j, level) per part."""
    sx, sy, sz = s
    out = []
    for i, j, lv in cells:
        out.append((sx // 2 + i * sx, sy // 2 + j * sy, sz // 2 + lv * sz,
                    grip(i, j, lv) if grip else None))
    return out


def _swap(parts: list[PartT], along: str) -> list[PartT]:
    """The parts of a shape laid out along x, turned to run along ``along``."""
    if along == "x":
        return parts
    return [(y, x, z, gr) for x, y, z, gr in parts]


def _along(s: Size, along: str) -> Size:
    """The part size with x the axis the shape runs along."""
    sx, sy, sz = s
    return (sx, sy, sz) if along == "x" else (sy, sx, sz)


def _tower(p: dict[str, Any], s: Size, along: str, has_vacuum: bool) -> list[PartT]:
    return _grid([(0, 0, lv) for lv in range(int(p["n"]))], s)


def _wall(p: dict[str, Any], s: Size, along: str, has_vacuum: bool) -> list[PartT]:
    cells = [(i, 0, lv) for lv in range(int(p["height"])) for i in range(int(p["width"]))]
    return _swap(_grid(cells, _along(s, along)), along)


def _staircase(p: dict[str, Any], s: Size, along: str, has_vacuum: bool) -> list[PartT]:
    n = int(p["steps"])
    cells = [(i, 0, lv) for lv in range(n) for i in range(n) if lv <= i]
    return _swap(_grid(cells, _along(s, along)), along)


def _pyramid(p: dict[str, Any], s: Size, along: str, has_vacuum: bool) -> list[PartT]:
    b = int(p["base"])
    s_al = _along(s, along)
    a, sz = s_al[0], s[2]
    out: list[PartT] = []
    for lv in range(b):
        for i in range(b - lv):
            out.append((a // 2 + i * a + lv * (a // 2), s_al[1] // 2, sz // 2 + lv * sz, None))
    return _swap(out, along)


def _arch(p: dict[str, Any], s: Size, along: str, has_vacuum: bool) -> list[PartT]:
    span, pillar = int(p["span"]), int(p["pillar"])
    s_al = _along(s, along)
    a, sz = s_al[0], s[2]
    # corbel step: a/4 keeps every stage and the finished arch standing with the
    # stability margin (3a/10, round 1's step, tips each half inward under the keystone
    # once forces must act a margin inside every contact edge)
    step = even(Fraction(a, 4))
    d = a // 2 + step * span  # pier centre distance from the middle
    c = d + a // 2  # the middle, from the low corner
    y = s_al[1] // 2
    out: list[PartT] = []
    for lv in range(pillar):
        out += [(c - d, y, sz // 2 + lv * sz, None), (c + d, y, sz // 2 + lv * sz, None)]
    for q in range(1, span + 1):
        z = sz // 2 + (pillar + q - 1) * sz
        out += [(c - d + step * q, y, z, None), (c + d - step * q, y, z, None)]
    out.append((c, y, sz // 2 + (pillar + span) * sz, None))
    return _swap(out, along)


def _canopy(p: dict[str, Any], s: Size, along: str, has_vacuum: bool) -> list[PartT]:
    h = int(p["height"])
    sx, sy, sz = s
    px, py = even(Fraction(4 * sx, 5)), even(Fraction(9 * sy, 10))
    ry = even(Fraction(13 * sy, 10))
    cx, cy = sx + sx // 2, ry + sy // 2  # the middle, from the low corner
    out: list[PartT] = []
    for dx, dy in ((-px, -py), (px, -py), (-px, py), (px, py)):
        for lv in range(h):
            out.append((cx + dx, cy + dy, sz // 2 + lv * sz, None))
    for dy in (-ry, 0, ry):
        for dx in (-sx, 0, sx):
            out.append((cx + dx, cy + dy, sz // 2 + h * sz, None))
    return out


def _enclosure(p: dict[str, Any], s: Size, along: str, has_vacuum: bool) -> list[PartT]:
    w, d, h = int(p["w"]), int(p["d"]), int(p["h"])
    cells = [(i, j, lv) for lv in range(h) for j in range(d) for i in range(w)
             if i in (0, w - 1) or j in (0, d - 1)]
    return _grid(cells, s)


def _block(p: dict[str, Any], s: Size, along: str, has_vacuum: bool) -> list[PartT]:
    w, d, h = int(p["w"]), int(p["d"]), int(p["h"])
    if w >= 2 and d >= 2 and not has_vacuum:
        raise Infeasible(f"a dense block {w} x {d} needs a vacuum gripper for its back "
                         "rows (with a parallel gripper the last cube of every 2 x 2 "
                         "square of touching cubes is boxed in on x and y), and the cell "
                         "has none", ("grip_access",))
    cells = [(i, j, lv) for lv in range(h) for j in range(d) for i in range(w)]
    vac = w >= 2 and d >= 2
    return _grid(cells, s, lambda i, j, lv: "vacuum" if vac and j >= 1 else None)


SHAPES: dict[str, Callable[[dict[str, Any], Size, str, bool], list[PartT]]] = {
    "tower": _tower, "wall": _wall, "staircase": _staircase, "pyramid": _pyramid,
    "bridge": _arch, "arch": _arch, "canopy": _canopy, "enclosure": _enclosure,
    "block": _block,
}


def shape(spec: StructureSpec, s: Size, has_vacuum: bool) -> list[PartT]:
    """The parts of a template structure (not packing) for part size ``s`` (U)."""
    build = SHAPES.get(spec.kind)
    if build is None:
        raise CellspecError(f"structure kind '{spec.kind}' is not implemented yet")
    return build(spec.params, s, str(spec.params.get("along", "x")), has_vacuum)


def symmetric(parts: list[PartT], s: Size, axis: int) -> bool:
    """The shape is its own mirror image about its middle on ``axis`` (0: x, 1: y)."""
    ext = max(p[:3][axis] for p in parts) + s[axis] // 2
    key = {(p[0], p[1], p[2]) for p in parts}
    for p in parts:
        q = list(p[:3])
        q[axis] = ext - q[axis]
        if tuple(q) not in key:
            return False
    return True

"""A verification instance: a cell's constants and a layout lowered to exact integers.

Every backend and the reference evaluator read this one object, so they agree on
the numbers by construction.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from cellspec.core import geometry as g
from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.kernel import BoxKernel, kernel_of
from cellspec.core.shapes import ShapesU, shapes_u
from cellspec.dsl.model import BoxZone, Cell
from cellspec.layout import Layout

if TYPE_CHECKING:
    from cellspec.solver.stability import Report


@dataclass(frozen=True)
class BoxU:
    lo: tuple[int, int, int]
    hi: tuple[int, int, int]


@dataclass
class Derived:
    """What the stages of one check derive from an instance and share (declared here, so no
    stage writes hidden attributes onto the frozen :class:`Instance`): the clingo broad
    phase's near pairs (the stability contacts' candidates), the stability report, and
    whether that report may leave a structure undecided (``solver/undecided.py``)."""

    near_pairs: tuple[np.ndarray, np.ndarray] | None = None
    stability_report: Report | None = None
    stability_tolerant: bool = False


@dataclass(frozen=True)
class Instance:
    """Integer geometry (units U = 0.05 mm) plus the symbols rules may ask about."""

    ids: tuple[str, ...]
    types: tuple[str, ...]
    grippers: tuple[str, ...]
    boxes: np.ndarray  # (n, 6) int64
    pos_m: np.ndarray  # (n, 3) float metres, as given
    size_m: np.ndarray  # (n, 3) float metres, resolved
    order_pos: np.ndarray | None  # (n,) position of each part in the order
    eps: int
    zones: dict[str, BoxU | g.HalfSpaceU]  # keep-outs plus "workspace"
    keepouts: tuple[str, ...]
    surfaces: dict[str, int]
    opening: int | None  # parallel gripper opening, U
    depth: int | None  # parallel finger depth, U
    off_grid: bool
    notes: tuple[str, ...] = ()
    masses: np.ndarray | None = None  # (n,) kg; for stable(p)
    friction: Fraction | None = None  # the cell's friction coefficient; for stable(p)
    stability_margin: Fraction | None = None  # m, the cell's `stability margin`; for stable(p)
    default_gripper: str = "parallel"  # the cell's default gripper kind (the ASP encoding)
    robots: tuple[str, ...] = ()  # the cell's robots, in order (`forall r in robot`)
    reach: dict[str, g.ReachU] | None = None  # robot -> its reach (reachable(p, r))
    # shapes (docs/shapes.md): yaw in degrees as written, cylinder rows and the exact shapes,
    # all None when every part is an axis-aligned box (then ``boxes`` are the parts;
    # otherwise the enclosing boxes): build_instance's _geometry chooses, once
    yaw_deg: np.ndarray | None = None  # (n,) float; None: all 0
    cyl: np.ndarray | None = None  # (n,) bool; None: no cylinder
    shapes: ShapesU | None = None  # the exact shapes when not plain
    ksize_m: np.ndarray | None = None  # (n, 3) the sizes the kernel sees (odd quarter turns
    # swap x and y); None: size_m
    # the box zones' bounds and the surfaces' heights as written, in U (exact Fractions): the
    # rounding analysis decides on them (``zones`` and ``surfaces`` are on the grid)
    zones_u: dict[str, tuple[tuple[Fraction, ...], tuple[Fraction, ...]]] | None = None
    surfaces_u: dict[str, Fraction] | None = None
    # derived once per instance, never passed in: ``dataclasses.replace`` starts afresh
    derived: Derived = field(default_factory=Derived, init=False, repr=False, compare=False)

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def plain(self) -> bool:
        """Every part is an axis-aligned box (no shapes): for the encodings that differ per
        kind (docs/architecture.md); a relation's meaning asks :meth:`kernel` instead."""
        return self.shapes is None

    def kernel(self) -> BoxKernel:
        """The parts' geometry kernel (cellspec/core/kernel.py): their boxes when every part
        is plain, else their shapes; callers never branch on which."""
        return kernel_of(self.boxes, self.shapes)


def shape_rows(cell: Cell, layout: Layout, size: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Per part: yaw (degrees), cylinder flag, the size the kernel sees (x and y swapped for a
    box turned by an odd multiple of 90 degrees) and whether every part is plain (an
    axis-aligned box: the layout is decided exactly as before shapes existed)."""
    n = len(layout)
    yaw = np.zeros(n) if layout.yaw is None else np.asarray(layout.yaw, dtype=np.float64)
    types = np.asarray(layout.types, dtype=object)
    cyl = np.zeros(n, dtype=bool)
    for t, pt in cell.part_types.items():
        if pt.shape == "cylinder":
            cyl |= types == t
    bad = np.flatnonzero(cyl & (size[:, 0] != size[:, 1]))
    if bad.size:
        i = int(bad[0])
        raise CellspecError(Diagnostic(layout.path, 0, 0, f"parts[{i}].size: part "
                                       f"'{layout.ids[i]}' is a cylinder ('{layout.types[i]}'): "
                                       "its size must be (diameter, diameter, height)"))
    rem = np.fmod(yaw, 90.0)
    quarter = (rem == 0) & ~cyl
    odd = quarter & (np.fmod(np.abs(yaw), 180.0) == 90.0)
    size = size.copy()
    size[odd, 0], size[odd, 1] = size[odd, 1].copy(), size[odd, 0].copy()
    return yaw, cyl, size, bool(quarter.all())


def enclosing_boxes(boxes: np.ndarray, yaw: np.ndarray, cyl: np.ndarray) -> np.ndarray:
    """The axis-aligned box enclosing each shape, rounded outward to whole units (a superset):
    a yawed box's half extents |cos| hx + |sin| hy; a cylinder's are its radius."""
    out = boxes.copy()
    turn = ~cyl & (np.fmod(yaw, 90.0) != 0)
    if not turn.any():
        return out
    b = boxes[turn]
    hx = (b[:, 1] - b[:, 0]) / 2.0
    hy = (b[:, 3] - b[:, 2]) / 2.0
    cx = (b[:, 1] + b[:, 0]) / 2.0
    cy = (b[:, 3] + b[:, 2]) / 2.0
    th = np.radians(yaw[turn])
    c, s = np.abs(np.cos(th)), np.abs(np.sin(th))
    ex = np.ceil(c * hx + s * hy + 1e-6)  # a hair outward: float error never shrinks it
    ey = np.ceil(s * hx + c * hy + 1e-6)
    out[turn, 0] = np.floor(cx - ex)
    out[turn, 1] = np.ceil(cx + ex)
    out[turn, 2] = np.floor(cy - ey)
    out[turn, 3] = np.ceil(cy + ey)
    return out


def _box_u(lo, hi, grow: int = 0) -> BoxU:
    """A box zone on the grid: bounds off it rounded outward (``grow`` 1: a keep-out), inward
    (-1: the workspace), or to the nearest unit (0)."""
    down: Callable[[Fraction], int]
    up: Callable[[Fraction], int]
    if grow == 0:
        down = up = g.to_u_int
    else:
        f, c = (math.floor, math.ceil) if grow > 0 else (math.ceil, math.floor)

        def _down(v: Fraction) -> int:
            return f(g.to_u(v))

        def _up(v: Fraction) -> int:
            return c(g.to_u(v))

        down, up = _down, _up
    a, b = [down(v) for v in lo], [up(v) for v in hi]
    return BoxU((a[0], a[1], a[2]), (b[0], b[1], b[2]))


def _off_grid(*vals) -> bool:
    return any(g.to_u(v).denominator != 1 for v in vals)


@dataclass(frozen=True)
class CellU:
    """A cell's constants on the integer grid (units U): what a backend reads besides the
    parts, for a concrete layout (:func:`build_instance`) or a free one (``cellspec lint``)."""

    eps: int
    zones: dict[str, BoxU | g.HalfSpaceU]  # keep-outs plus "workspace"
    keepouts: tuple[str, ...]
    surfaces: dict[str, int]
    opening: int | None  # parallel gripper opening, U
    depth: int | None  # parallel finger depth, U
    notes: tuple[str, ...]
    robots: tuple[str, ...] = ()
    reach: dict[str, g.ReachU] | None = None
    zones_u: dict[str, tuple[tuple[Fraction, ...], tuple[Fraction, ...]]] | None = None
    surfaces_u: dict[str, Fraction] | None = None


def robots_u(cell: Cell) -> dict[str, g.ReachU]:
    """Each robot's base, reach and reach box on the integer grid (reachable(p, r))."""
    out = {}
    for r in cell.robots:
        box = cell.twin.reach_boxes.get(r.name) if cell.twin is not None else None
        out[r.name] = g.reach_u(r.base, r.reach, (box.lo, box.hi) if box is not None else None)
    return out


def cell_u(cell: Cell) -> CellU:
    """The cell's tolerance, zones, surfaces and parallel-gripper sizes in U."""
    notes = []
    eps_u = g.to_u(cell.epsilon)
    eps = int(eps_u)
    if eps_u.denominator != 1:
        notes.append(f"contact tolerance {float(cell.epsilon)} m rounded down to "
                     f"{eps * float(g.U):.5f} m (the 0.05 mm grid)")
    ws = cell.workspace
    zones: dict[str, BoxU | g.HalfSpaceU] = {"workspace": _box_u(ws.lo, ws.hi, -1)}
    if _off_grid(*ws.lo, *ws.hi):
        notes.append("the workspace has a bound off the 0.05 mm grid: it is rounded inward "
                     "(the safe side)")
    for z in cell.keepouts:
        if isinstance(z, BoxZone):
            zones[z.name] = _box_u(z.box.lo, z.box.hi, 1)
            if _off_grid(*z.box.lo, *z.box.hi):
                notes.append(f"keep-out {z.name} has a bound off the 0.05 mm grid: it is "
                             "rounded outward (the safe side)")
        else:
            zones[z.name] = g.halfspace_u(z.coef, z.op, z.rhs)
    grip = cell.gripper_params("parallel")
    return CellU(
        eps=eps,
        zones=zones,
        keepouts=tuple(z.name for z in cell.keepouts),
        surfaces={s.name: g.to_u_int(s.z) for s in cell.surfaces},
        opening=g.to_u_int(grip.opening) if grip.opening is not None else None,
        depth=g.to_u_int(grip.depth) if grip.depth is not None else None,
        notes=tuple(notes),
        robots=tuple(r.name for r in cell.robots),
        reach=robots_u(cell),
        zones_u={"workspace": (tuple(g.to_u(v) for v in ws.lo), tuple(g.to_u(v) for v in ws.hi)),
                 **{z.name: (tuple(g.to_u(v) for v in z.box.lo),
                             tuple(g.to_u(v) for v in z.box.hi))
                    for z in cell.keepouts if isinstance(z, BoxZone)}},
        surfaces_u={sf.name: g.to_u(sf.z) for sf in cell.surfaces},
    )


def build_instance(cell: Cell, layout: Layout) -> Instance:
    """Resolve default sizes and grippers against the cell and quantise the layout."""
    n = len(layout)
    types = np.array(layout.types, dtype=object)
    diags = []
    for t in sorted(set(layout.types)):
        pt = cell.part_types.get(t)
        rows = types == t
        if pt is None:
            first = int(np.argmax(rows))
            known = ", ".join(sorted(cell.part_types)) or "none"
            diags.append(Diagnostic(layout.path, 0, 0, f"parts[{first}].type: unknown part type "
                                    f"'{t}' (the cell defines: {known}); {int(rows.sum())} "
                                    "part(s) use it"))
    if diags:
        raise CellspecError(diags[:20])
    size = layout.resolve(cell)
    yaw, cyl, ksize, plain = shape_rows(cell, layout, size.reshape(n, 3))
    q = g.quantise(np.asarray(layout.pos, dtype=np.float64).reshape(n, 3), ksize)
    boxes, shapes, yaw_deg, cyl_rows = _geometry(q.boxes, yaw, cyl, plain)
    cu = cell_u(cell)
    order_pos = None
    if layout.order is not None:
        index = {pid: k for k, pid in enumerate(layout.order)}
        order_pos = np.array([index[pid] for pid in layout.ids], dtype=np.int64)
    default = cell.default_gripper.kind
    return Instance(
        ids=layout.ids,
        types=layout.types,
        grippers=tuple(gk or default for gk in layout.grippers),
        boxes=boxes,
        pos_m=np.asarray(layout.pos, dtype=np.float64),
        size_m=size,
        order_pos=order_pos,
        eps=cu.eps,
        zones=cu.zones,
        keepouts=cu.keepouts,
        surfaces=cu.surfaces,
        opening=cu.opening,
        depth=cu.depth,
        off_grid=q.off_grid,
        notes=cu.notes,
        masses=_masses(cell, layout, size),
        friction=getattr(cell, "friction", None),
        stability_margin=getattr(cell, "stability_margin", None),
        default_gripper=default,
        robots=cu.robots,
        reach=cu.reach,
        yaw_deg=yaw_deg,
        cyl=cyl_rows,
        shapes=shapes,
        ksize_m=ksize,
        zones_u=cu.zones_u,
        surfaces_u=cu.surfaces_u,
    )


def _geometry(boxes: np.ndarray, yaw: np.ndarray, cyl: np.ndarray, plain: bool
              ) -> tuple[np.ndarray, ShapesU | None, np.ndarray | None, np.ndarray | None]:
    """An instance's geometry: (boxes, shapes, yaw rows, cylinder rows). Every part plain:
    the grid boxes are the parts and the rest None; otherwise the exact shapes
    (cellspec.core.shapes) and their enclosing boxes. The one place that chooses
    (``Instance.kernel`` reads its answer)."""
    if plain:  # the one chooser of an instance's geometry (construction)
        return boxes, None, None, None
    shapes = shapes_u(boxes, yaw, cyl)
    return shapes.box, shapes, yaw, cyl


def _masses(cell: Cell, layout: Layout, size: np.ndarray) -> np.ndarray:
    """Each part's mass: its type's mass scaled by volume (a part's own size keeps the
    type's density), else its volume times 1000 kg/m^3."""
    vol = np.prod(size, axis=1)
    types = np.asarray(layout.types, dtype=object)
    for t, pt in cell.part_types.items():
        if pt.shape == "cylinder":
            vol[types == t] *= math.pi / 4  # a cylinder fills pi/4 of its bounding box
    out = vol * 1000.0
    for t, pt in cell.part_types.items():
        if pt.mass is not None:
            rows = types == t
            if rows.any():
                nominal = float(pt.size[0] * pt.size[1] * pt.size[2])
                if pt.shape == "cylinder":
                    nominal *= math.pi / 4
                out[rows] = float(pt.mass) * vol[rows] / nominal
    return out


def lin_to_int(terms: list[tuple[str, Fraction]], const_m: Fraction) -> tuple[list[int], int]:
    """Scale a comparison whose attribute values are given in 2U units to integers.

    Returns integer coefficients for the attribute values (each read as 2x its value
    in U) and an integer constant; the comparison's direction is unchanged.
    """
    # value_m = val2u * U / 2  =>  coef_m * value_m = coef_m * U/2 * val2u
    coefs = [c * g.U / 2 for _, c in terms]
    const = Fraction(const_m)
    den = math.lcm(*(f.denominator for f in (*coefs, const)))
    return [int(c * den) for c in coefs], int(const * den)

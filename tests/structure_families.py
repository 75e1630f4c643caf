"""Seeded random block structures for the physics-agreement benchmark and its CI test.

``structures(n, seed)`` returns ``n`` :class:`StructureCase` records (a family name, a
:class:`~cellspec.layout.Layout` with a buildable bottom-up ``order``, and a short
description) drawn round-robin from ``FAMILIES``; the same ``(n, seed, families)`` gives
the same structures. Every part is placed with the vacuum gripper (its top is free when
it is placed, bottom-up), so ``grip_access`` says nothing about stability. Every part
rests exactly on what is below it (or on the table at z 0); footprints may overlap their
support only partly, or, for a few offset stacks, not at all.

The part types are those of :func:`cell_text` (the dual-arm station plus beams, a plate,
a small cube and a block, all of the cube's density, 800 kg/m^3). Families:

* ``offset_stack``: 3-4 cubes, each shifted up to ±3 cm in x and ±1 cm in y from the
  one below (the issue's measurement).
* ``counterweight``: a cube overhanging its base cube by 1-4.5 cm, balanced by a cube on
  its inner half (placed after it: the stage before may fall); or a beam on a cube with
  a load on its outer end and a counterweight on its inner end, in both orders.
* ``bridge``: two pillars (1-2 cubes) and either two roof cubes whose centres lie within
  ±6 mm of their pillars' inner edges (touching in the middle or not), or a beam over
  the gap with varying overlap.
* ``cantilever``: a 0.10/0.15/0.20 m beam on a cube with an overhang, with or without a
  load cube on it.
* ``pyramid``: rows of 3, 2, 1 cubes, each upper cube shifted randomly.
* ``wall``: a row of 3-4 cubes with gaps, a second row spanning the gaps at random offsets.
* ``canopy``: a plate on 2-4 pillars moved away from its corners (the plate's centre of
  mass may leave the pillars' support polygon).
* ``mixed``: a stack of 3-4 parts of mixed sizes with random offsets.

Shape families (issue 22; not in ``FAMILIES``, so the default set is unchanged: name them,
or pass ``SHAPE_FAMILIES``; their cell is ``cell_text(shapes=True)``, which adds the
``can`` cylinder):

* ``rotated_roof``: two pillars (1-2 cubes) and a cube or 0.10 m beam turned 20-70 deg
  over the gap, its centre moved up to +-1.5 cm.
* ``yawed_stack``: 3-4 cubes, each turned 0-90 deg and shifted up to +-2.5 cm in x and
  +-1 cm in y from the one below.
* ``cylinders_on_blocks``: a can on a cube (or a cube on a can) off centre, a can on two
  cubes, or a 0.15 m beam, turned up to 30 deg, across two cans.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cellspec.dsl.parser import load_cell
from cellspec.layout import Layout, layout_from_obj

DENSITY = 800.0  # kg/m^3: the station's cube, 0.1 kg for 0.05 m
# name -> size (m); masses are DENSITY times volume (the cell text gives them)
PART_TYPES: dict[str, tuple[float, float, float]] = {
    "cube": (0.05, 0.05, 0.05),
    "small": (0.03, 0.03, 0.03),
    "block": (0.08, 0.05, 0.04),
    "beam10": (0.10, 0.05, 0.02),
    "beam15": (0.15, 0.05, 0.02),
    "beam20": (0.20, 0.05, 0.02),
    "plate": (0.20, 0.15, 0.02),
}
CAN = (0.025, 0.05)  # the shape families' cylinder: radius, height (m)
# the cylinder-stack families' parts (tests/cylinder_stacks.py; in the cell only
# with ``shapes=True``): cylinders (radius, height) and a tall box, as in issue 28
CANS: dict[str, tuple[float, float]] = {"can": CAN, "tallcan": (0.025, 0.08)}
SHAPE_PART_TYPES: dict[str, tuple[float, float, float]] = {"post": (0.04, 0.04, 0.10)}
CX, CY = 0.45, 0.275  # the structures' centre: the middle of the station's workspace
STATION = Path(__file__).resolve().parents[1] / "rules" / "cells" / "dual_arm_station.cell"


@dataclass(frozen=True)
class StructureCase:
    """One generated structure: its family, a layout with an order, and what it is."""

    family: str
    index: int
    layout: Layout
    note: str


def cell_text(*, margin: float | None = None, import_stability: bool = False,
              station: Path = STATION, shapes: bool = False) -> str:
    """The benchmark's cell: the dual-arm station (``import physical``) with the part
    types above; ``margin`` adds ``stability margin M`` (the lead's item), and
    ``import_stability`` adds ``import stability`` (the opt-in rule of today)."""
    text = station.read_text(encoding="utf-8")
    text = text.split("\ntest ", 1)[0]  # the station's own tests are not the benchmark's
    types = []
    for name, s in PART_TYPES.items():
        if name == "cube":
            continue
        mass = DENSITY * s[0] * s[1] * s[2]
        types.append(f"    part {name} size ({s[0]:.2f}, {s[1]:.2f}, {s[2]:.2f}) "
                     f"mass {mass:.4f}")
    anchor = "    part cube size (0.05, 0.05, 0.05) mass 0.1\n"
    if anchor not in text:
        raise RuntimeError(f"{station}: the cube part type line changed; update "
                           "tests/structure_families.py")
    if shapes:
        for name, (r, h) in CANS.items():
            types.append(f"    part {name} cylinder radius {r:g} height {h:g} mass "
                         f"{DENSITY * math.pi * r * r * h:.4f}")
        for name, s in SHAPE_PART_TYPES.items():
            types.append(f"    part {name} size ({s[0]:.2f}, {s[1]:.2f}, {s[2]:.2f}) "
                         f"mass {DENSITY * s[0] * s[1] * s[2]:.4f}")
    extra = "\n".join(types) + "\n"
    if margin is not None:
        extra += f"    stability margin {margin:g}\n"
    text = text.replace(anchor, anchor + extra)
    if import_stability:
        text = text.replace("import physical\n", "import physical\nimport stability\n", 1)
    return text


def load_cell_variant(*, margin: float | None = None, import_stability: bool = False,
                      shapes: bool = False):
    """:func:`cell_text` loaded as a Cell (written to a temporary ``physics_agreement.cell``:
    a cell that imports needs a file)."""
    with tempfile.TemporaryDirectory(prefix="cellspec-structures-") as d:
        path = Path(d) / "physics_agreement.cell"
        path.write_text(cell_text(margin=margin, import_stability=import_stability,
                                  shapes=shapes), encoding="utf-8")
        return load_cell(path)


class _Builder:
    """Collects parts (bottom-up); every part's z rests on the given support top."""

    def __init__(self) -> None:
        self.parts: list[dict] = []

    def add(self, pid: str, kind: str, x: float, y: float, bottom: float,
            yaw: float = 0.0) -> float:
        """Add a part whose bottom is at ``bottom`` (turned by ``yaw`` degrees); returns its
        top."""
        h = CANS[kind][1] if kind in CANS else _box_size(kind)[2]
        part = {"id": pid, "type": kind, "gripper": "vacuum",
                "pos": [round(x, 6), round(y, 6), round(bottom + h / 2, 6)]}
        if yaw:
            part["yaw"] = round(yaw, 3)
        self.parts.append(part)
        return bottom + h

    def overlaps(self) -> bool:
        """Whether two parts' interiors intersect (the generator redraws then)."""
        if any(p["type"] in CANS or p.get("yaw") or p["type"] in SHAPE_PART_TYPES
               for p in self.parts):
            return _shape_overlaps(self.parts)
        boxes = []
        for p in self.parts:
            s = np.array(PART_TYPES[p["type"]])
            c = np.array(p["pos"])
            boxes.append((c - s / 2, c + s / 2))
        for a in range(len(boxes)):
            for b in range(a + 1, len(boxes)):
                lo = np.maximum(boxes[a][0], boxes[b][0])
                hi = np.minimum(boxes[a][1], boxes[b][1])
                if np.all(hi - lo > 1e-6):
                    return True
        return False

    def layout(self, order: Sequence[str] | None = None, path: str = "<structure>") -> Layout:
        ids = [p["id"] for p in self.parts]
        return layout_from_obj({"units": "m", "parts": self.parts,
                                "order": list(order) if order is not None else ids}, path)


def _box_size(kind: str) -> tuple[float, float, float]:
    """A box type's size (m): the benchmark's types and the cylinder families' post."""
    return PART_TYPES[kind] if kind in PART_TYPES else SHAPE_PART_TYPES[kind]


def _u(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(rng.uniform(lo, hi))


def _offset_stack(rng: np.random.Generator) -> tuple[_Builder, list[str] | None, str]:
    b = _Builder()
    n = int(rng.integers(3, 5))
    x, y, top = CX, CY, 0.0
    for k in range(n):
        if k:
            x += _u(rng, -0.03, 0.03)
            y += _u(rng, -0.01, 0.01)
        top = b.add(f"c{k + 1}", "cube", x, y, top)
    return b, None, f"{n} cubes, offsets up to 3 cm x, 1 cm y"


def _counterweight(rng: np.random.Generator) -> tuple[_Builder, list[str] | None, str]:
    b = _Builder()
    sgn = 1.0 if rng.random() < 0.5 else -1.0
    if rng.random() < 0.5:  # cube arm overhanging a cube, weight on its inner half
        dx = _u(rng, 0.01, 0.045)
        top = b.add("base", "cube", CX, CY, 0.0)
        top = b.add("arm", "cube", CX + sgn * dx, CY, top)
        w = _u(rng, 0.0, 0.025)
        b.add("weight", "cube", CX + sgn * (dx - w), CY, top)
        return b, None, f"cube arm overhang {dx * 1000:.0f} mm, weight {w * 1000:.0f} mm in"
    kind = "beam15" if rng.random() < 0.5 else "beam20"
    length = PART_TYPES[kind][0]
    off = _u(rng, -0.02, 0.02)
    top = b.add("base", "cube", CX, CY, 0.0)
    top = b.add("beam", kind, CX + off, CY, top)
    xl = CX + off + sgn * (length / 2 - _u(rng, 0.0, 0.03))  # the load near the outer end
    xw = CX + off - sgn * (length / 2 - _u(rng, 0.0, 0.03))  # the weight near the inner end
    b.add("load", "cube", xl, CY, top)
    b.add("weight", "cube", xw, CY, top)
    if rng.random() < 0.5:
        return b, ["base", "beam", "load", "weight"], f"{kind}, load before counterweight"
    return b, ["base", "beam", "weight", "load"], f"{kind}, counterweight before load"


def _bridge(rng: np.random.Generator) -> tuple[_Builder, list[str] | None, str]:
    b = _Builder()
    levels = int(rng.integers(1, 3))
    if rng.random() < 0.5:  # two roof cubes, each centre near its pillar's inner edge
        gap = _u(rng, 0.05, 0.07)  # between the pillars' inner faces
        xl, xr = CX - gap / 2 - 0.025, CX + gap / 2 + 0.025
        tl = tr = 0.0
        for k in range(levels):
            tl = b.add(f"pl{k + 1}", "cube", xl, CY, tl)
            tr = b.add(f"pr{k + 1}", "cube", xr, CY, tr)
        el, er = _u(rng, -0.006, 0.006), _u(rng, -0.006, 0.006)
        rl = xl + 0.025 + el  # roof centre = pillar inner edge + e
        rr = xr - 0.025 - er
        if rr - rl < 0.05:  # would overlap: make them touch
            mid = (rl + rr) / 2
            rl, rr = mid - 0.025, mid + 0.025
        b.add("r1", "cube", rl, CY, tl)
        b.add("r2", "cube", rr, CY, tr)
        return b, None, (f"{levels}-high pillars, roof centres {el * 1000:+.1f}/"
                         f"{er * 1000:+.1f} mm past the edges")
    kind = "beam15" if rng.random() < 0.5 else "beam20"
    length = PART_TYPES[kind][0]
    span = _u(rng, 0.05, length + 0.03)  # centre distance of the pillars' inner faces
    xl, xr = CX - span / 2 - 0.025, CX + span / 2 + 0.025
    tl = tr = 0.0
    for k in range(levels):
        tl = b.add(f"pl{k + 1}", "cube", xl, CY, tl)
        tr = b.add(f"pr{k + 1}", "cube", xr, CY, tr)
    b.add("roof", kind, CX + _u(rng, -0.03, 0.03), CY, tl)
    return b, None, f"{kind} over a {span * 1000:.0f} mm gap"


def _cantilever(rng: np.random.Generator) -> tuple[_Builder, list[str] | None, str]:
    b = _Builder()
    kind = ("beam10", "beam15", "beam20")[int(rng.integers(0, 3))]
    length = PART_TYPES[kind][0]
    sgn = 1.0 if rng.random() < 0.5 else -1.0
    over = _u(rng, 0.005, 0.045)  # the beam centre past the pillar centre (edge: 0.025)
    top = b.add("pillar", "cube", CX - sgn * 0.03, CY, 0.0)
    xb = CX - sgn * 0.03 + sgn * over
    top = b.add("beam", kind, xb, CY, top)
    if rng.random() < 0.5:
        at = _u(rng, -length / 2 + 0.025, length / 2 - 0.025)
        b.add("load", "cube", xb + sgn * at, CY, top)
        return b, None, f"{kind} {over * 1000:.0f} mm out, load at {at * 1000:+.0f} mm"
    return b, None, f"{kind} {over * 1000:.0f} mm out, no load"


def _pyramid(rng: np.random.Generator) -> tuple[_Builder, list[str] | None, str]:
    b = _Builder()
    gap = _u(rng, 0.0, 0.03)
    xs = [CX + (k - 1) * (0.05 + gap) for k in range(3)]
    for k, x in enumerate(xs):
        b.add(f"a{k + 1}", "cube", x, CY, 0.0)
    mids = [(xs[0] + xs[1]) / 2 + _u(rng, -0.06, 0.06),
            (xs[1] + xs[2]) / 2 + _u(rng, -0.06, 0.06)]
    if mids[1] - mids[0] < 0.05:
        c = (mids[0] + mids[1]) / 2
        mids = [c - 0.025, c + 0.025]
    for k, x in enumerate(mids):
        b.add(f"b{k + 1}", "cube", x, CY + _u(rng, -0.005, 0.005), 0.05)
    b.add("top", "cube", (mids[0] + mids[1]) / 2 + _u(rng, -0.08, 0.08), CY, 0.10)
    return b, None, f"pyramid 3-2-1, base gaps {gap * 1000:.1f} mm"


def _wall(rng: np.random.Generator) -> tuple[_Builder, list[str] | None, str]:
    b = _Builder()
    n = int(rng.integers(3, 5))
    xs = [CX - 0.1]
    for _ in range(n - 1):
        xs.append(xs[-1] + 0.05 + _u(rng, 0.0, 0.045))
    for k, x in enumerate(xs):
        b.add(f"a{k + 1}", "cube", x, CY, 0.0)
    last = -1.0
    for k in range(n - 1):
        x = (xs[k] + xs[k + 1]) / 2 + _u(rng, -0.035, 0.035)
        x = max(x, last + 0.05)
        last = x
        b.add(f"b{k + 1}", "cube", x, CY, 0.05)
    return b, None, f"wall of {n} with gaps, {n - 1} spanning cubes"


def _canopy(rng: np.random.Generator) -> tuple[_Builder, list[str] | None, str]:
    b = _Builder()
    k = int(rng.integers(2, 5))
    levels = int(rng.integers(1, 3))
    corners = [(-1, -1), (1, 1), (1, -1), (-1, 1)][:k]
    if k == 2 and rng.random() < 0.5:
        corners = [(-1, 0), (1, 0)]
    shift = _u(rng, 0.0, 0.13)
    ang = _u(rng, 0.0, 2 * math.pi)
    dx, dy = shift * math.cos(ang), shift * math.sin(ang)
    top = 0.0
    for j, (sx, sy) in enumerate(corners):
        x = CX + sx * 0.075 + dx
        y = CY + sy * 0.05 + dy
        t = 0.0
        for lv in range(levels):
            t = b.add(f"p{j + 1}{'abc'[lv]}", "cube", x, y, t)
        top = t
    b.add("plate", "plate", CX, CY, top)
    return b, None, f"plate on {k} pillars moved {shift * 1000:.0f} mm"


def _mixed(rng: np.random.Generator) -> tuple[_Builder, list[str] | None, str]:
    b = _Builder()
    n = int(rng.integers(3, 5))
    kinds = ["cube", "small", "block", "beam10"]
    x, y, top = CX, CY, 0.0
    names = []
    for k in range(n):
        kind = kinds[int(rng.integers(0, len(kinds)))]
        if k:
            x += _u(rng, -0.035, 0.035)
            y += _u(rng, -0.01, 0.01)
        top = b.add(f"m{k + 1}", kind, x, y, top)
        names.append(kind)
    return b, None, "stack of " + ", ".join(names)


def _shape_overlaps(parts: list[dict]) -> bool:
    """Whether two parts' interiors intersect, on their footprints (shapely) and heights."""
    import shapely

    geo, zs = [], []
    for p in parts:
        x, y, z = p["pos"]
        if p["type"] in CANS:
            r, h = CANS[p["type"]]
            geo.append(shapely.Point(x, y).buffer(r, quad_segs=32))
        else:
            sx, sy, h = _box_size(p["type"])
            t = math.radians(p.get("yaw", 0.0))
            c, s = math.cos(t), math.sin(t)
            geo.append(shapely.Polygon([(x + a * sx / 2 * c - b * sy / 2 * s,
                                         y + a * sx / 2 * s + b * sy / 2 * c)
                                        for a, b in ((1, 1), (-1, 1), (-1, -1), (1, -1))]))
        zs.append((z - h / 2, z + h / 2))
    for a in range(len(parts)):
        for b in range(a + 1, len(parts)):
            if min(zs[a][1], zs[b][1]) - max(zs[a][0], zs[b][0]) > 1e-6 and \
                    geo[a].intersection(geo[b]).area > 1e-9:
                return True
    return False


def _rotated_roof(rng: np.random.Generator) -> tuple[_Builder, list[str] | None, str]:
    b = _Builder()
    levels = int(rng.integers(1, 3))
    kind = "cube" if rng.random() < 0.5 else "beam10"
    gap = _u(rng, 0.01, 0.07)  # between the pillars' inner faces
    xl, xr = CX - gap / 2 - 0.025, CX + gap / 2 + 0.025
    tl = tr = 0.0
    for k in range(levels):
        tl = b.add(f"pl{k + 1}", "cube", xl, CY, tl)
        tr = b.add(f"pr{k + 1}", "cube", xr, CY, tr)
    yaw = _u(rng, 20.0, 70.0)
    dx, dy = _u(rng, -0.015, 0.015), _u(rng, -0.015, 0.015)
    b.add("roof", kind, CX + dx, CY + dy, tl, yaw)
    return b, None, (f"{kind} at {yaw:.0f} deg over a {gap * 1000:.0f} mm gap, moved "
                     f"{dx * 1000:+.0f}/{dy * 1000:+.0f} mm")


def _yawed_stack(rng: np.random.Generator) -> tuple[_Builder, list[str] | None, str]:
    b = _Builder()
    n = int(rng.integers(3, 5))
    x, y, top = CX, CY, 0.0
    for k in range(n):
        if k:
            x += _u(rng, -0.025, 0.025)
            y += _u(rng, -0.01, 0.01)
        top = b.add(f"c{k + 1}", "cube", x, y, top, _u(rng, 0.0, 90.0) if k else 0.0)
    return b, None, f"{n} yawed cubes, offsets up to 2.5 cm x, 1 cm y"


def _cylinders_on_blocks(rng: np.random.Generator) -> tuple[_Builder, list[str] | None, str]:
    b = _Builder()
    r = CAN[0]
    pick = rng.random()
    if pick < 0.4:  # a can on a cube, or a cube on a can, off centre
        d, ang = _u(rng, 0.0, 0.035), _u(rng, 0.0, 2 * math.pi)
        low, high = ("cube", "can") if rng.random() < 0.5 else ("can", "cube")
        top = b.add("low", low, CX, CY, 0.0)
        b.add("high", high, CX + d * math.cos(ang), CY + d * math.sin(ang), top)
        return b, None, f"{high} on {low}, {d * 1000:.0f} mm off centre"
    if pick < 0.7:  # a can on two cubes
        gap = _u(rng, 0.0, 0.04)
        xl, xr = CX - gap / 2 - 0.025, CX + gap / 2 + 0.025
        b.add("bl", "cube", xl, CY, 0.0)
        top = b.add("br", "cube", xr, CY, 0.0)
        dx, dy = _u(rng, -0.02, 0.02), _u(rng, -0.01, 0.01)
        b.add("can", "can", CX + dx, CY + dy, top)
        return b, None, f"can on two cubes {gap * 1000:.0f} mm apart, moved {dx * 1000:+.0f} mm"
    span = _u(rng, 0.06, 0.14)  # a beam across two cans
    b.add("kl", "can", CX - span / 2, CY, 0.0)
    top = b.add("kr", "can", CX + span / 2, CY, 0.0)
    yaw = _u(rng, -30.0, 30.0)
    dx = _u(rng, -0.03, 0.03)
    b.add("beam", "beam15", CX + dx, CY + _u(rng, -r / 2, r / 2), top, yaw)
    return b, None, (f"beam15 at {yaw:.0f} deg across cans {span * 1000:.0f} mm apart, moved "
                     f"{dx * 1000:+.0f} mm")


SHAPE_FAMILIES: dict[str, Callable[[np.random.Generator],
                                   tuple[_Builder, list[str] | None, str]]] = {
    "rotated_roof": _rotated_roof, "yawed_stack": _yawed_stack,
    "cylinders_on_blocks": _cylinders_on_blocks,
}


FAMILIES: dict[str, Callable[[np.random.Generator], tuple[_Builder, list[str] | None, str]]] = {
    "offset_stack": _offset_stack, "counterweight": _counterweight, "bridge": _bridge,
    "cantilever": _cantilever, "pyramid": _pyramid, "wall": _wall, "canopy": _canopy,
    "mixed": _mixed,
}


def structures(n: int, seed: int = 0, families: Sequence[str] | None = None) -> list[StructureCase]:
    """``n`` structures, round-robin over ``families`` (default all boxes: ``FAMILIES``;
    the shape families are named or passed as ``SHAPE_FAMILIES``), from ``seed``."""
    from cylinder_stacks import CYLINDER_FAMILIES

    fams = list(families) if families else list(FAMILIES)
    known = {**FAMILIES, **SHAPE_FAMILIES, **CYLINDER_FAMILIES}
    bad = [f for f in fams if f not in known]
    if bad:
        raise ValueError(f"unknown families {bad}; known: {', '.join(known)}")
    out = []
    for i in range(n):
        fam = fams[i % len(fams)]
        rng = np.random.default_rng([seed, i])
        for _ in range(100):
            b, order, note = known[fam](rng)
            if not b.overlaps():
                break
        else:
            raise RuntimeError(f"{fam}: no overlap-free structure in 100 draws (seed {seed})")
        out.append(StructureCase(fam, i, b.layout(order, f"<{fam} #{i}>"), note))
    return out

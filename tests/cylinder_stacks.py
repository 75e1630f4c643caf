"""Cylinder-stack families of the physics-agreement benchmark (issue 28): stacks on the rims
of vertical cylinders, where ``check`` once passed structures that fall.

One part of each stack (above the lowest) has its centre near the edge of the part below
(a can's rim, a box's edge, in a random direction): from 3 mm beyond it to 5 mm inside
it; every other part's centre lies within half the reach of the part below's footprint.
A stack is cut to fit under the station's workspace top. Their cell is
``structure_families.cell_text(shapes=True)`` (the ``can`` and ``tallcan``
cylinders, the 0.04 x 0.04 x 0.10 ``post``).

* ``can_stack``: 2-4 cans (``can`` or ``tallcan``), each on the one below.
* ``rim_stack``: 3-4 parts drawn from cans, posts and cubes (boxes turned 0-90 deg), at
  least one cylinder among the two lowest; the shape of issue 28's can, post, can.
"""

from __future__ import annotations

import math

import numpy as np
from structure_families import CANS, CX, CY, _box_size, _Builder, _u

BEYOND, INSIDE = 0.003, 0.005  # m: the near band, from beyond the edge to inside it
TOP = 0.30  # m: the station's workspace top; a stack is cut below it


def _edge_reach(kind: str, yaw: float, ang: float) -> float:
    """How far (m) from a part's centre its footprint reaches in the direction ``ang``
    (rad): a can's radius, a box's distance to its boundary (turned by ``yaw`` deg)."""
    if kind in CANS:
        return CANS[kind][0]
    sx, sy, _ = _box_size(kind)
    a = ang - math.radians(yaw)
    ux, uy = abs(math.cos(a)), abs(math.sin(a))
    return min(sx / 2 / ux if ux > 1e-12 else math.inf, sy / 2 / uy if uy > 1e-12 else math.inf)


def _offset(rng: np.random.Generator, kind: str, yaw: float,
            near: bool) -> tuple[float, float, float]:
    """A seeded offset (dx, dy, distance inside the edge) from a part's centre for the
    part on it: near its edge, or within half its reach."""
    ang = _u(rng, 0.0, 2 * math.pi)
    reach = _edge_reach(kind, yaw, ang)
    inside = _u(rng, -BEYOND, INSIDE) if near else _u(rng, reach / 2, reach)
    d = max(reach - inside, 0.0)
    return d * math.cos(ang), d * math.sin(ang), reach - d


def _height(kind: str) -> float:
    return CANS[kind][1] if kind in CANS else _box_size(kind)[2]


def _stack(rng: np.random.Generator, kinds: list[str]) -> tuple[_Builder, list[str] | None, str]:
    while len(kinds) > 2 and sum(_height(k) for k in kinds) > TOP:
        kinds = kinds[:-1]
    b = _Builder()
    x, y, top = CX, CY, 0.0
    below, below_yaw = "", 0.0
    notes = []
    rim = int(rng.integers(1, len(kinds)))  # the part put near the edge below
    for k, kind in enumerate(kinds):
        yaw = 0.0 if kind in CANS or k == 0 else round(_u(rng, 0.0, 90.0), 2)
        if k:
            dx, dy, inside = _offset(rng, below, below_yaw, k == rim)
            x, y = x + dx, y + dy
            notes.append(f"{kind} {inside * 1000:+.1f} mm inside {below}'s edge")
        top = b.add(f"{kind[0]}{k + 1}", kind, x, y, top, yaw)
        below, below_yaw = kind, yaw
    return b, None, "; ".join(notes)


def _can_stack(rng: np.random.Generator) -> tuple[_Builder, list[str] | None, str]:
    n = int(rng.integers(2, 5))
    return _stack(rng, [list(CANS)[int(rng.integers(0, len(CANS)))] for _ in range(n)])


def _rim_stack(rng: np.random.Generator) -> tuple[_Builder, list[str] | None, str]:
    pool = [*CANS, "post", "cube"]
    n = int(rng.integers(3, 5))
    kinds = [pool[int(rng.integers(0, len(pool)))] for _ in range(n)]
    if not any(k in CANS for k in kinds[:2]):
        kinds[int(rng.integers(0, 2))] = list(CANS)[int(rng.integers(0, len(CANS)))]
    return _stack(rng, kinds)


CYLINDER_FAMILIES = {"can_stack": _can_stack, "rim_stack": _rim_stack}

"""Boundary cases 10-50 um either side of a rule's threshold, with their exact answer.

Each case is a cell (its rules read one threshold), a layout placed so that the threshold
is passed (``delta > 0``: the rule is violated exactly) or not (``delta < 0``) by
``|delta|`` metres, and the exact verdict, computed here in closed form (the support of a
yawed rectangle or a disc along a direction), not by the kernel under test. A backend may
answer the exact verdict or ``unknown``; a ``pass`` where the exact verdict is ``fail``
is a wrong pass (issue 28). ``python tests/rounding_cases.py`` counts them per family.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

EPS = 0.001
HEAD = """cell sweep {{
    units m
    workspace x [0.0, 1.2] y [0.0, 1.2] z [0.0, 0.6]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
    part block size (0.04, 0.06, 0.05)
    part can cylinder radius 0.025 height 0.08
{zones}    stability off
}}
"""
KEEPOUT = 'rule keepout "{p} enters {k}" : forall p: forall k in keepout: not intersects(p, k)\n'
SIZES = {"cube": (0.05, 0.05, 0.05), "block": (0.04, 0.06, 0.05), "can": (0.05, 0.05, 0.08)}


@dataclass(frozen=True)
class Case:
    family: str
    cell: str  # the cell text
    layout: dict
    delta: float  # metres past the threshold (> 0: violated exactly)
    exact: str  # "pass" or "fail"

    def label(self) -> str:
        return f"{self.family} delta={self.delta * 1e6:+.0f}um {self.layout['parts']}"


def _support(kind: str, yaw: float, a: float, b: float) -> float:
    """max over the footprint (centred at 0) of a x + b y: a yawed rectangle or a disc."""
    hx, hy, _ = (s / 2 for s in SIZES[kind])
    if kind == "can":
        return hx * math.hypot(a, b)
    c, s = math.cos(math.radians(yaw)), math.sin(math.radians(yaw))
    return hx * abs(a * c + b * s) + hy * abs(-a * s + b * c)


def _part(pid: str, kind: str, x: float, y: float, z: float, yaw: float) -> dict:
    out: dict = {"id": pid, "type": kind, "pos": [round(x, 9), round(y, 9), round(z, 9)]}
    if yaw and kind != "can":
        out["yaw"] = yaw
    return out


def _kind_yaw(rng: random.Random) -> tuple[str, float]:
    kind = rng.choice(["cube", "block", "can"])
    yaw = 0.0 if kind == "can" or rng.random() < 0.3 else round(rng.uniform(-80, 80), 2)
    return kind, yaw


def _delta(rng: random.Random) -> float:
    return rng.choice([-1, 1]) * rng.randint(10, 50) * 1e-6


def keepout_box(rng: random.Random) -> Case:
    """A part entering the box x [0.60, 0.70] y [0.40, 0.60] z [0, 0.30] from one side (or
    from above) by eps + delta."""
    kind, yaw = _kind_yaw(rng)
    d = _delta(rng)
    zones = "    keepout post box x [0.60, 0.70] y [0.40, 0.60] z [0, 0.30]\n"
    hz = SIZES[kind][2] / 2
    side = rng.choice(["-x", "+x", "-y", "+y", "top"])
    into = EPS + d  # how far the part's extreme point is past the face
    x, y, z = 0.65 + rng.uniform(-0.01, 0.01), 0.50 + rng.uniform(-0.03, 0.03), hz
    if side == "-x":
        x = 0.60 + into - _support(kind, yaw, 1, 0)
    elif side == "+x":
        x = 0.70 - into + _support(kind, yaw, -1, 0)
    elif side == "-y":
        y = 0.40 + into - _support(kind, yaw, 0, 1)
    elif side == "+y":
        y = 0.60 - into + _support(kind, yaw, 0, -1)
    else:
        z = 0.30 - into + hz
    cell = HEAD.format(zones=zones) + KEEPOUT
    lay = {"units": "m", "parts": [_part("p", kind, x, y, z, yaw)]}
    return Case(f"keepout-box{side}", cell, lay, d, "fail" if d > 0 else "pass")


HALVES = [((1, 0, 0), ">", 0.8), ((1, 1, 0), ">", 1.2), ((1, -2, 0), "<", -0.3),
          ((2, 1, 0), ">=", 1.9), ((1, 0, 1), ">", 0.85), ((-1, 1, 0), "<", -0.3)]


def keepout_half(rng: random.Random) -> Case:
    """A part entering a half-space keep-out by delta (Euclidean distance) past the region
    shrunk by eps (the L-infinity ball of radius eps)."""
    kind, yaw = _kind_yaw(rng)
    d = _delta(rng)
    (a, b, c), op, rhs = rng.choice(HALVES)
    hz = SIZES[kind][2] / 2
    y, z = 0.45 + rng.uniform(-0.05, 0.05), hz
    sign = 1 if op in (">", ">=") else -1
    # sign * (a x + b y + c z + support - slack - rhs) = |(a, b, c)| d at the extreme point
    slack = EPS * (abs(a) + abs(b) + abs(c))
    sup = _support(kind, yaw, sign * a, sign * b) + abs(c) * hz
    norm = math.sqrt(a * a + b * b + c * c)
    lin = rhs + sign * (slack - sup + norm * d)  # the centre's a x + b y + c z
    x = (lin - b * y - c * z) / a
    terms = " + ".join(f"{k}*{ax}" for k, ax in zip((a, b, c), "xyz", strict=True) if k)
    zones = f"    keepout wall : {terms} {op} {rhs}\n".replace("+ -", "- ")
    cell = HEAD.format(zones=zones) + KEEPOUT
    lay = {"units": "m", "parts": [_part("p", kind, x, y, z, yaw)]}
    return Case("keepout-half", cell, lay, d, "fail" if d > 0 else "pass")


ATTRS = ["x", "y", "top", "bottom", "xmin", "xmax", "ymin", "ymax"]
OPS = ["<", "<=", ">", ">=", "==", "!="]


def _attr_value(kind: str, yaw: float, x: float, y: float, z: float, attr: str) -> float:
    hz = SIZES[kind][2] / 2
    ex, ey = _support(kind, yaw, 1, 0), _support(kind, yaw, 0, 1)
    return {"x": x, "y": y, "top": z + hz, "bottom": z - hz, "xmin": x - ex, "xmax": x + ex,
            "ymin": y - ey, "ymax": y + ey}[attr]


def comparison(rng: random.Random, attr: str | None = None, op: str | None = None,
               d: float | None = None) -> Case:
    """``forall p: p.ATTR OP T`` with the attribute delta from T (on the side that breaks
    the comparison when delta > 0, for < <= > >=; == breaks at any delta != 0)."""
    kind, yaw = _kind_yaw(rng)
    attr = attr or rng.choice(ATTRS)
    op = op or rng.choice(OPS)
    d = _delta(rng) if d is None else d
    t = {"x": 0.4, "y": 0.3, "top": 0.1, "bottom": 0.05, "xmin": 0.35, "xmax": 0.45,
         "ymin": 0.25, "ymax": 0.35}[attr]
    hz = SIZES[kind][2] / 2
    x, y, z = 0.4, 0.3, 0.075
    away = {"<": 1, "<=": 1, ">": -1, ">=": -1, "==": 1, "!=": 1}[op] * d
    v = t + away  # the attribute's exact value
    base = _attr_value(kind, yaw, x, y, z, attr)
    if attr in ("x", "xmin", "xmax"):
        x += v - base
    elif attr in ("y", "ymin", "ymax"):
        y += v - base
    else:
        z += v - base
    holds = {"<": v < t, "<=": v <= t, ">": v > t, ">=": v >= t, "==": v == t,
             "!=": v != t}[op]
    rule = f'rule cmp "{{p}} breaks it" : forall p: p.{attr} {op} {t}\n'
    cell = HEAD.format(zones="") + rule
    lay = {"units": "m", "parts": [_part("p", kind, x, y, z + 0 * hz, yaw)]}
    return Case(f"cmp-{attr}{op}", cell, lay, d, "pass" if holds else "fail")


def pair_cmp(rng: random.Random) -> Case:
    """``forall p, q: p.x - q.x <= 0.2`` with two parts 0.2 + delta apart in x."""
    d = _delta(rng)
    rule = 'rule spread "{p} is far from {q}" : forall p, q: p.x - q.x <= 0.2\n'
    cell = HEAD.format(zones="") + rule
    x0 = 0.3 + rng.uniform(0, 0.01)
    lay = {"units": "m", "parts": [_part("a", "cube", x0, 0.3, 0.025, 0),
                                   _part("b", "cube", x0 + 0.2 + d, 0.3, 0.025, 0)]}
    return Case("cmp-pair", cell, lay, d, "fail" if d > 0 else "pass")


def grounded(rng: random.Random) -> Case:
    """A part whose bottom is eps + delta above the table (``grounded``)."""
    kind, yaw = _kind_yaw(rng)
    d = _delta(rng)
    rule = 'rule rest "{p} floats" : forall p: grounded(p)\n'
    cell = HEAD.format(zones="") + rule
    z = SIZES[kind][2] / 2 + EPS + d
    lay = {"units": "m", "parts": [_part("p", kind, 0.4, 0.3, z, yaw)]}
    return Case("grounded", cell, lay, d, "fail" if d > 0 else "pass")


def workspace(rng: random.Random) -> Case:
    """A part eps + delta past the workspace's face x = 1.2."""
    kind, yaw = _kind_yaw(rng)
    d = _delta(rng)
    rule = 'rule ws "{p} is out" : forall p: inside(p, workspace)\n'
    cell = HEAD.format(zones="") + rule
    x = 1.2 + EPS + d - _support(kind, yaw, 1, 0)
    lay = {"units": "m", "parts": [_part("p", kind, x, 0.3, SIZES[kind][2] / 2, yaw)]}
    return Case("workspace", cell, lay, d, "fail" if d > 0 else "pass")


def overlap(rng: random.Random) -> Case:
    """Two cubes overlapping by eps + delta along x."""
    d = _delta(rng)
    rule = 'rule col "{p} hits {q}" : forall {p, q}: not overlaps(p, q)\n'
    cell = HEAD.format(zones="") + rule
    x0 = 0.3 + rng.uniform(0, 0.01)
    lay = {"units": "m", "parts": [_part("a", "cube", x0, 0.3, 0.025, 0),
                                   _part("b", "cube", x0 + 0.05 - EPS - d, 0.3, 0.025, 0)]}
    return Case("overlap", cell, lay, d, "fail" if d > 0 else "pass")


FAMILIES = {"keepout-box": keepout_box, "keepout-half": keepout_half,
            "comparison": comparison, "comparison-pair": pair_cmp, "grounded": grounded,
            "workspace": workspace, "overlap": overlap}


def run(case: Case, backend: str = "clingo") -> str:
    """The verdict of ``cellspec.check`` on a case (a fresh cell file each time)."""
    import tempfile
    from pathlib import Path

    import cellspec
    from cellspec.layout import layout_from_obj

    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "sweep.cell"
        f.write_text(case.cell)
        cell = cellspec.load_cell(str(f))
    return str(cellspec.check(cell, layout_from_obj(case.layout), backend=backend).verdict)


if __name__ == "__main__":  # the before/after counts of issue 28
    import sys

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    backends = sys.argv[2].split(",") if len(sys.argv) > 2 else ["clingo"]
    for name, make in FAMILIES.items():
        rng = random.Random(28)
        cases = [make(rng) for _ in range(n)]
        for backend in backends:
            verdicts = [run(c, backend) for c in cases]
            should_fail = sum(c.exact == "fail" for c in cases)
            pairs = list(zip(verdicts, cases, strict=True))
            wrong = sum(v == "pass" and c.exact == "fail" for v, c in pairs)
            unknown = sum(v == "unknown" for v in verdicts)
            wrong_fail = sum(v == "fail" and c.exact == "pass" for v, c in pairs)
            print(f"{name:16s} {backend:9s} cases {n:4d} exact-fail {should_fail:4d} "
                  f"wrong-pass {wrong:4d} unknown {unknown:4d} wrong-fail {wrong_fail:4d}")

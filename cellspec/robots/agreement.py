"""Physics agreement: label structures with the settle oracle, drop what is within its
noise, and count how ``check`` verdicts agree (used by bench/physics_agreement.py and
tests/test_physics_agreement.py, so both drop and count the same way).

Noise: :func:`measure_noise` settles structures that obviously stand (aligned towers of
1-6 cubes, an aligned 4x2 wall, a beam centred on two pillars, a plate on four aligned
pillars) and returns the largest displacement and rotation any part shows. A structure
is dropped when settle's answer lies within ``NOISE_FACTOR`` times that noise either side
of the fall threshold (and no part is clearly past that band), or when its verdict
changes with every part moved by a seeded ±``PERTURB`` in x and y, the seeded offsets and
then their opposites (tested when its largest displacement is at most ``PERTURB_MAX``:
the others are far from the threshold). Both signs, and for structures that barely move
too, because at settle's 960 Hz a structure in unstable equilibrium (a load exactly over
an edge) may stand still, moving 0.1 mm like a solid one, and fall when moved 0.2 mm one
way only: one random offset finds that half of the time, an offset and its opposite
always (unless it is parallel to the edge).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from cellspec.core.status import Status
from cellspec.dsl.model import Cell
from cellspec.layout import Layout, layout_from_obj
from cellspec.robots import settle as st

NOISE_FACTOR = 2.0  # the drop band: this many times the measured noise either side
PERTURB = 0.0002  # metres: the perturbation of the noise test
PERTURB_MAX = 0.05  # largest displacement (m) up to which the perturbation runs
KEYS = ("true_pass", "true_fail", "false_pass", "false_fail", "unknown")


@dataclass(frozen=True)
class Noise:
    """The oracle's noise on obvious standers (largest over all of them)."""

    displacement: float  # metres
    rotation_deg: float
    standers: tuple[dict[str, Any], ...]  # name, verdict, displacement, rotation_deg

    @property
    def band(self) -> tuple[float, float]:
        """Half-widths (m, deg) of the drop band around the fall threshold."""
        return NOISE_FACTOR * self.displacement, NOISE_FACTOR * self.rotation_deg


@dataclass(frozen=True)
class Label:
    """Settle's label of one structure: falls or not, why dropped (None: kept), seconds."""

    fall: bool
    drop: str | None
    message: str
    max_displacement: float
    seconds: float
    cpu_seconds: float
    perturbed: bool = False


def obvious_standers(cylinders: bool = False) -> list[tuple[str, Layout]]:
    """Structures that stand beyond doubt (part types of ``tests/structure_families.py``;
    with ``cylinders`` also towers of 2-4 aligned cans, whose cell has the ``can``)."""
    out = []

    def lay(name: str, parts: list[tuple[str, str, float, float, float]]) -> None:
        obj = {"parts": [{"id": i, "type": t, "pos": [x, y, z], "gripper": "vacuum"}
                         for i, t, x, y, z in parts]}
        out.append((name, layout_from_obj(obj, f"<{name}>")))

    for h in range(1, 7):
        lay(f"tower{h}", [(f"c{k}", "cube", 0.45, 0.275, 0.025 + 0.05 * k) for k in range(h)])
    lay("wall4x2", [(f"w{k}{j}", "cube", 0.375 + 0.05 * k, 0.275, 0.025 + 0.05 * j)
                    for j in range(2) for k in range(4)])
    lay("beam_on_pillars", [("p1", "cube", 0.40, 0.275, 0.025),
                            ("p2", "cube", 0.50, 0.275, 0.025),
                            ("b", "beam15", 0.45, 0.275, 0.06)])
    lay("canopy4", [(f"p{k}", "cube", 0.45 + sx * 0.075, 0.275 + sy * 0.05, 0.025)
                    for k, (sx, sy) in enumerate([(-1, -1), (1, 1), (1, -1), (-1, 1)])]
        + [("plate", "plate", 0.45, 0.275, 0.06)])
    if cylinders:
        for h in range(2, 5):
            lay(f"cans{h}", [(f"k{k}", "can", 0.45, 0.275, 0.025 + 0.05 * k) for k in range(h)])
    return out


def measure_noise(cell: Cell, cylinders: bool = False) -> Noise:
    """Settle every obvious stander in ``cell`` (which must define the structures' part
    types); the largest displacement and rotation seen is the oracle's noise."""
    rows = []
    disp: list[float] = []
    rot: list[float] = []
    for name, lay in obvious_standers(cylinders):
        r = st.settle(cell, lay)
        disp.append(round(r.max_displacement, 7))
        rot.append(round(max(m.rotation_deg for m in r.parts), 4))
        rows.append({"name": name, "verdict": r.verdict, "displacement": disp[-1],
                     "rotation_deg": rot[-1]})
    return Noise(max(disp), max(rot), tuple(rows))


def perturbed(layout: Layout, seed: int, index: int, sign: int = 1) -> Layout:
    """The layout with every part moved by a seeded ±PERTURB in x and y (``sign`` -1: the
    opposite offsets)."""
    rng = np.random.default_rng([seed, index, 99])
    pos = np.array(layout.pos, dtype=float)
    pos[:, :2] += sign * rng.uniform(-PERTURB, PERTURB, size=(len(layout), 2))
    obj = layout.to_json()
    for k, part in enumerate(obj["parts"]):
        part["pos"] = [float(v) for v in pos[k]]
    return layout_from_obj(obj, layout.path)


def ambiguous(res: st.SettleResult, band: tuple[float, float]) -> bool:
    """Settle's answer lies within ``band`` (m, deg either side) of the fall threshold, and
    no part is clearly past it."""
    bd, br = band
    near = any(abs(m.displacement - st.FALL_DISPLACEMENT) < bd
               or abs(m.rotation_deg - st.FALL_ROTATION_DEG) < br for m in res.parts)
    clear = any(m.displacement > st.FALL_DISPLACEMENT + bd
                or m.rotation_deg > st.FALL_ROTATION_DEG + br for m in res.parts)
    return near and not clear


def label(cell: Cell, layout: Layout, noise: Noise, *, seed: int = 0, index: int = 0,
          perturb: bool = True) -> Label:
    """Settle's label of one structure, with both noise tests."""
    t0, c0 = time.perf_counter(), time.process_time()
    r = st.settle(cell, layout)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    drop = None
    tried = False
    if ambiguous(r, noise.band):
        drop = "within the noise band of the threshold"
    elif perturb and r.max_displacement <= PERTURB_MAX:
        tried = True
        for sign in (1, -1):
            if st.settle(cell, perturbed(layout, seed, index, sign)).verdict != r.verdict:
                drop = f"verdict changes under a {PERTURB * 1000:.1f} mm perturbation"
                break
    return Label(fall=r.verdict == "fall", drop=drop, message=r.message(),
                 max_displacement=r.max_displacement, seconds=dt, cpu_seconds=dc,
                 perturbed=tried)


def outcome(falls: bool, verdict: str) -> str:
    """One of KEYS for a settle label and a check verdict (``unknown`` is never a pass)."""
    if verdict == Status.UNKNOWN:
        return "unknown"
    if verdict == Status.PASS:
        return "false_pass" if falls else "true_pass"
    return "true_fail" if falls else "false_fail"


def confusion(rows: list[tuple[str, bool, str]]) -> dict[str, dict[str, int]]:
    """rows (family, settle says it falls, check verdict) -> counts per family and ``all``."""
    fams: dict[str, Counter] = defaultdict(Counter)
    for fam, falls, verdict in rows:
        o = outcome(falls, verdict)
        fams[fam][o] += 1
        fams["all"][o] += 1
    return {f: {k: c[k] for k in KEYS} for f, c in fams.items()}

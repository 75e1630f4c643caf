"""Write the larger Table V layouts (seed 000, Section IV-D) as JSON files.

Deterministic: running it again reproduces every file byte for byte
(``tests/test_rules_library.py`` checks this). Usage::

    python rules/layouts/make_layouts.py            # write next to this script
    python rules/layouts/make_layouts.py --out DIR  # write somewhere else

All layouts are for the dual-arm station (rules/cells/dual_arm_station.cell):
5 cm cubes, workspace x [0.20, 0.70] y [0.05, 0.50] z [0, 0.30], table at z 0,
parallel gripper opening 0.07 depth 0.02 (finger clearance 0.01 m per side).
Positions are cube centres in metres, on the 0.1 mm grid.
"""

from __future__ import annotations

import argparse
from pathlib import Path

CUBE = 0.05
HALF = CUBE / 2

Part = dict[str, object]


def z_of(level: int) -> float:
    """Centre height of a cube in layer ``level`` (1 = on the table)."""
    return HALF + (level - 1) * CUBE


def cube(pid: str, x: float, y: float, z: float, gripper: str | None = None) -> Part:
    p: Part = {"id": pid, "type": "cube", "pos": [round(x, 4), round(y, 4), round(z, 4)]}
    if gripper:
        p["gripper"] = gripper
    return p


def moved(parts: list[Part], ids: set[str], axis: int, value: float | None = None,
          delta: float | None = None) -> list[Part]:
    """A copy of ``parts`` with the given parts moved to ``value`` (or by ``delta``) on an axis."""
    out = []
    for p in parts:
        q = dict(p)
        if p["id"] in ids:
            pos = list(p["pos"])  # type: ignore[call-overload]
            pos[axis] = round(value if value is not None else pos[axis] + delta, 4)
            q["pos"] = pos
        out.append(q)
    return out


# --- wall of 9: 3 wide (along x) by 3 high --------------------------------------------
# Built course by course, left to right: each cube's left neighbour is already placed
# (x blocked), nothing stands beside it on y, so the parallel gripper grips along y.

def wall_9() -> list[Part]:
    parts = []
    k = 1
    for level in (1, 2, 3):
        for i in range(3):
            parts.append(cube(f"w{k}", 0.35 + i * CUBE, 0.20, z_of(level)))
            k += 1
    return parts


# --- dense block of 12: 3 (x) by 2 (y) by 2 high, every cube touching its neighbours ------
# With a parallel gripper the last cube of any 2 x 2 square of touching cubes is boxed in
# on both x and y, so no order places a dense block with it alone. The front row (y 0.20,
# b1-b3 and b7-b9) goes in with the parallel gripper (left to right: x blocked, y free);
# the back row (y 0.25, b4-b6 and b10-b12) with the vacuum cup, which only needs the
# cube's top free. Layer 1 first, then layer 2.

def dense_block_12() -> list[Part]:
    parts = []
    k = 1
    for level in (1, 2):
        for j, grip in ((0, None), (1, "vacuum")):
            for i in range(3):
                parts.append(cube(f"b{k}", 0.35 + i * CUBE, 0.20 + j * CUBE, z_of(level), grip))
                k += 1
    return parts


# --- canopy of 21: four pillars of three cubes and a 3 x 3 roof ----------------------------
# Centre (0.45, 0.275). Pillars p1-p4 stand at (0.45 -/+ 0.04, 0.275 -/+ 0.045):
# p1 (0.41, 0.23), p2 (0.49, 0.23), p3 (0.41, 0.32), p4 (0.49, 0.32); they stand
# 0.03 m apart on x and 0.04 m on y, leaving an open space under the roof.
# Roof r1-r9 (layer 4, z 0.175): x in {0.40, 0.45, 0.50}, rows y in {0.21, 0.275, 0.34}
# (r1-r3 front row, r4-r6 middle, r7-r9 back). Each row's cubes touch along x; the rows
# stand 0.015 m apart on y, wider than the 0.01 m finger clearance, so the parallel
# gripper can place every roof cube along y (a 3 x 3 roof of touching cubes would box
# in the last cube of each 2 x 2 square). Touching a neighbour's side is not support, so
# the pillars sit under the roof's corners and every roof cube overlaps a pillar top:
# a corner cube rests on one pillar (overlap 0.04 x 0.03), an edge cube on two
# (overlap 0.01 or 0.005 on the narrow side), the centre cube r5 on all four
# (0.01 x 0.005 each). Every roof cube's centre lies over its supports.

CANOPY_PILLARS = {"p1": (0.41, 0.23), "p2": (0.49, 0.23), "p3": (0.41, 0.32),
                  "p4": (0.49, 0.32)}


def canopy_21() -> list[Part]:
    parts = []
    for name, (x, y) in CANOPY_PILLARS.items():
        for level in (1, 2, 3):
            parts.append(cube(f"{name}_{level}", x, y, z_of(level)))
    k = 1
    for y in (0.21, 0.275, 0.34):
        for x in (0.40, 0.45, 0.50):
            parts.append(cube(f"r{k}", x, y, z_of(4)))
            k += 1
    return parts


def canopy_order_roof_first(parts: list[Part]) -> list[str]:
    ids = [str(p["id"]) for p in parts]
    return [i for i in ids if i.startswith("r")] + [i for i in ids if not i.startswith("r")]


# --- the files -------------------------------------------------------------------------

def layouts() -> dict[str, dict[str, object]]:
    """File name -> layout object (parts in placement order unless an order is given)."""
    out: dict[str, dict[str, object]] = {}

    def put(name: str, parts: list[Part], order: list[str] | None = None) -> None:
        out[name] = {"units": "m", "parts": parts,
                     "order": order if order is not None else [str(p["id"]) for p in parts]}

    wall = wall_9()
    put("wall_9.json", wall)
    # Table V "Move row to y = 0.01 in wall": the top course w7-w9.
    put("wall_9_row_moved.json", moved(wall, {"w7", "w8", "w9"}, axis=1, value=0.01))

    block = dense_block_12()
    put("dense_block_12.json", block)
    # Table V "Overlap cubes in dense block": b8 (layer 2, front, middle) pushed 0.02 m
    # along -x into b7.
    put("dense_block_12_overlap.json", moved(block, {"b8"}, axis=0, delta=-0.02))

    canopy = canopy_21()
    put("canopy_21.json", canopy)
    # Table V "Move pillar to x = 0.85 in canopy": pillar p4, all three cubes.
    put("canopy_21_pillar_moved.json",
        moved(canopy, {"p4_1", "p4_2", "p4_3"}, axis=0, value=0.85))
    # Table V "Place roof before pillars in canopy": same layout, roof placed first.
    put("canopy_21_roof_first.json", canopy, canopy_order_roof_first(canopy))
    return out


def render(obj: dict[str, object]) -> str:
    """Stable JSON text: one part per line."""
    import json

    lines = ["{", f'  "units": {json.dumps(obj["units"])},', '  "parts": [']
    parts = obj["parts"]
    assert isinstance(parts, list)
    for k, p in enumerate(parts):
        comma = "," if k < len(parts) - 1 else ""
        lines.append(f"    {json.dumps(p)}{comma}")
    lines.append("  ],")
    lines.append(f'  "order": {json.dumps(obj["order"])}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_all(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, obj in layouts().items():
        path = out_dir / name
        path.write_bytes(render(obj).encode("utf-8"))
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent,
                    help="directory to write into (default: next to this script)")
    args = ap.parse_args(argv)
    for path in write_all(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

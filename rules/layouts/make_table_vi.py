"""Write the ten Table VI scenarios (seed 000, Section IV-D) as rule files.

Each scenario is the dual-arm station plus the blocked region reported by the twin,
added as keep-out zone(s) named ``blocked*``, and one test: a structure from the
library that was being built there now enters the region (the expected violations are
the keepout rule's, computed here with the verifier and written with ``only``).
``bench/recovery.py`` and ``tests/test_repair_tables.py`` repair each one with
``cellspec repair`` (CP-SAT) and re-verify the result. Deterministic::

    python rules/layouts/make_table_vi.py    # writes rules/scenarios/table_vi_*.cell
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
CUBE = 0.05

STATION = """    units m
    workspace x [0.20, 0.70] y [0.05, 0.50] z [0.00, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    robot irb120 model abb_irb120 base (0, 0.275, 0) yaw 0 reach 0.58 gripper vacuum
    robot irb1600 model abb_irb1600 base (0.95, 0.275, 0) yaw 180 reach 1.2 """ \
    """gripper parallel opening 0.07 depth 0.02
    default gripper parallel opening 0.07 depth 0.02
    tolerance contact 0.001"""


def z_of(level: int) -> float:
    return CUBE / 2 + (level - 1) * CUBE


def tower(n: int, x: float, y: float, pre: str = "t") -> list[dict]:
    return [{"id": f"{pre}{k + 1}", "type": "cube", "pos": [x, y, z_of(k + 1)]}
            for k in range(n)]


def wall_9(y: float) -> list[dict]:
    out = []
    k = 1
    for level in (1, 2, 3):
        for i in range(3):
            out.append({"id": f"w{k}", "type": "cube",
                        "pos": [round(0.35 + i * CUBE, 4), y, z_of(level)]})
            k += 1
    return out


def pyramid_6(y: float, x0: float = 0.35) -> list[dict]:
    xs = [(x0, 1), (x0 + 0.05, 1), (x0 + 0.10, 1), (x0 + 0.025, 2), (x0 + 0.075, 2),
          (x0 + 0.05, 3)]
    return [{"id": f"a{k + 1}", "type": "cube", "pos": [round(x, 4), y, z_of(lv)]}
            for k, (x, lv) in enumerate(xs)]


def staircase_8() -> list[dict]:
    cols = [(0.35, 1), (0.40, 2), (0.45, 2), (0.50, 3)]
    out = []
    for level in (1, 2, 3):
        for x, h in cols:
            if level <= h:
                out.append({"id": f"s{len(out) + 1}", "type": "cube",
                            "pos": [x, 0.20, z_of(level)]})
    return out


def library(name: str) -> list[dict]:
    return json.loads((HERE / f"{name}.json").read_text())["parts"]


# (file stem, title, error type, keep-outs, parts, note)
SCENARIOS = [
    ("01_workspace_boundary", "Workspace boundary (x > 0.6)", "IK failure",
     ["keepout blocked : x > 0.6"], tower(3, 0.62, 0.20),
     "A 3-cube tower at x 0.62: the IRB1600 cannot reach beyond x 0.6."),
    ("02_height_limit", "Height limit (z > 0.15)", "Self-collision",
     ["keepout blocked : z > 0.15"], tower(5, 0.40, 0.20),
     "A 5-cube tower: above z 0.15 the arm collides with itself; the top two must come down."),
    ("03_ik_singularity", "IK singularity (centre)", "Singularity",
     ["keepout blocked box x [0.40, 0.50] y [0.225, 0.325] z [0, 0.30]"], pyramid_6(0.275),
     "A 3-2-1 pyramid on the IRB120's base axis line (y 0.275) at mid reach, where its "
     "wrist is singular: a column x [0.40, 0.50] y [0.225, 0.325] is blocked."),
    ("04_env_collision", "Environment collision (y > 0.4)", "Collision",
     ["keepout blocked : y > 0.4"], wall_9(0.42),
     "A 3 x 3 wall at y 0.42 hits a fixture beyond y 0.4."),
    ("05_boundary_and_height", "Combined (boundary + height)", "Multiple",
     ["keepout blocked_x : x > 0.6", "keepout blocked_z : z > 0.15"], tower(5, 0.62, 0.20),
     "A 5-cube tower at x 0.62: beyond x 0.6 and above z 0.15 are both blocked."),
    ("06_narrow_corridor", "Narrow corridor (only x in [0.3, 0.4])", "Constrained",
     ["keepout blocked_lo : x < 0.3", "keepout blocked_hi : x > 0.4"], staircase_8(),
     "The 8-cube staircase (x 0.325 to 0.525) must fit a corridor two cubes wide."),
    ("07_low_ceiling", "Low ceiling (z > 0.08)", "Self-collision",
     ["keepout blocked : z > 0.08"], pyramid_6(0.20),
     "A 3-2-1 pyramid under a ceiling at z 0.08: only the first layer fits; flatten."),
    ("08_y_band", "Y-band (only y in [0.23, 0.37])", "Env collision",
     ["keepout blocked_lo : y < 0.23", "keepout blocked_hi : y > 0.37"], wall_9(0.20),
     "A 3 x 3 wall at y 0.20 must move into the band y [0.23, 0.37]."),
    ("09_diagonal_obstacle", "Diagonal obstacle (x + y > 0.7)", "Env collision",
     ["keepout blocked : x + y > 0.7"], library("canopy_21"),
     "The 21-cube canopy (x up to 0.525, y up to 0.365) against a diagonal obstacle."),
    ("10_corner_pocket", "Corner pocket (small area)", "Multiple",
     ["keepout blocked_x : x < 0.55", "keepout blocked_y : y < 0.35"],
     library("dense_block_12"),
     "The 3 x 2 x 2 dense block must fit the only free pocket, x [0.55, 0.70] x y [0.35, "
     "0.50] (0.15 m x 0.15 m)."),
]


def render(stem: str, title: str, etype: str, zones: list[str], parts: list[dict],
           note: str, expected: list[str]) -> str:
    lines = [
        f"// Table VI of seed 000 (Section IV-D), scenario {stem[:2]}: {title} ({etype}).",
        "// The blocked region reported by the twin is a keep-out of the cell. " + note,
        "// `cellspec repair` re-lays the structure out (bench/recovery.py,",
        "// tests/test_repair_tables.py). Written by ../layouts/make_table_vi.py.",
        "import physical",
        "",
        f"cell table_vi_{stem} {{",
        STATION,
        *[f"    {z}" for z in zones],
        "}",
        "",
        "test structure_enters_blocked_region {",
        "    layout {",
    ]
    for p in parts:
        x, y, z = p["pos"]
        grip = f" gripper {p['gripper']}" if p.get("gripper") else ""
        lines.append(f"        {p['id']} {p['type']} at ({x:g}, {y:g}, {z:g}){grip}")
    lines.append("    }")
    lines.append(f"    order ({', '.join(p['id'] for p in parts)})")
    lines.append("    expect fail " + " ".join(expected))
    lines.append("    only")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    import sys

    sys.path.insert(0, str(HERE.parents[1]))
    from cellspec.dsl.parser import load_cell
    from cellspec.layout import layout_from_obj
    from cellspec.solver.verify import check

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE.parent / "scenarios")
    a = ap.parse_args()
    for stem, title, etype, zones, parts, note in SCENARIOS:
        path = a.out / f"table_vi_{stem}.cell"
        first = [f"keepout({parts[0]['id']})"]
        path.write_text(render(stem, title, etype, zones, parts, note, first))
        cell = load_cell(path)
        lay = layout_from_obj({"parts": parts, "order": [p["id"] for p in parts]})
        v = check(cell, lay)
        exp = [f"{x.rule}({', '.join(x.parts)})" for x in v.violations]
        assert exp and all(x.rule == "keepout" for x in v.violations), (stem, exp)
        path.write_text(render(stem, title, etype, zones, parts, note, exp))


if __name__ == "__main__":
    main()

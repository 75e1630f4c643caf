"""The recovery scenarios of seed 000 (Tables V and VI) as data, for the benchmark and the
tests: each is a rule-file test whose layout fails; recovery is :func:`repair` followed
by an independent clingo re-verification."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from cellspec.core.status import Status
from cellspec.dsl.model import Cell, TestCase
from cellspec.layout import Layout

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "rules" / "scenarios"

# Table V: the paper's nine human modifications (row, test name in table_v.cell)
TABLE_V = [
    ("Move cube to x=1.0 in tower", "WS", "tower_3_cube_moved_to_x_1"),
    ("Move row to y=0.01 in wall", "WS", "wall_9_row_moved_to_y_001"),
    ("Move pillar to x=0.85 in canopy", "WS", "canopy_21_pillar_moved_to_x_085"),
    ("Stack two cubes at same position", "Col", "pyramid_6_two_cubes_same_position"),
    ("Overlap cubes in dense block", "Col", "dense_block_12_overlap"),
    ("Remove middle cube from tower", "Grav", "tower_5_middle_cube_removed"),
    ("Remove pillar from bridge", "Grav", "bridge_5_pillar_removed"),
    ("Reverse staircase assembly order", "Seq", "staircase_8_reversed_order"),
    ("Place roof before pillars in canopy", "Seq", "canopy_21_roof_before_pillars"),
]


def table_vi_files() -> list[Path]:
    return sorted(SCENARIOS.glob("table_vi_*.cell"))


def find_test(cell: Cell, name: str) -> TestCase:
    for t in cell.tests:
        if t.name == name:
            return t
    raise KeyError(name)


@dataclass(frozen=True)
class ScenarioOutcome:
    """One scenario's outcome: detected (the original fails), recovered (repaired and the
    repaired layout passes an independent clingo check), and what it cost."""

    name: str
    kind: str
    parts: int
    detected: bool
    recovered: bool
    status: str
    moved: int
    displacement: float
    reordered: bool
    seconds: float
    llm_calls: int = 0
    note: str = ""


def recover(cell: Cell, layout: Layout, name: str, kind: str,
            time_limit: float = 10.0, keep_shape: bool = False
            ) -> tuple[ScenarioOutcome, dict | None]:
    """Repair one scenario and re-verify the result independently."""
    from cellspec.layout import layout_from_obj
    from cellspec.solver.cpsat.repair import repair
    from cellspec.solver.verify import check

    t0 = time.perf_counter()
    r = repair(cell, layout, time_limit=time_limit, keep_shape=keep_shape)
    secs = time.perf_counter() - t0
    detected = r.before is not None and r.before.verdict == Status.FAIL
    ok = False
    if r.layout is not None:
        again = check(cell, layout_from_obj(r.layout))
        ok = again.verdict == Status.PASS and len(r.layout["parts"]) == len(layout)
        types_kept = sorted(p["type"] for p in r.layout["parts"]) == sorted(layout.types)
        ok = ok and types_kept
    return ScenarioOutcome(name=name, kind=kind, parts=len(layout), detected=detected, recovered=ok,
                    status=r.status, moved=r.parts_moved, displacement=r.displacement,
                    reordered=r.reordered, seconds=secs, note=r.reason or ""), r.layout

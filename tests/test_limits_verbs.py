"""Issue 16, the verbs bounded last: ``sim`` and ``design`` honour one --time-limit for the
whole verb and a --max-memory budget (a worker stopped at the deadline gives ``unknown``,
exit 2, and writes nothing); ``check()`` in Python refuses a layout whose ground size cannot
fit its memory budget before grounding it (reason: grounding limit)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, run_cellspec_process

import cellspec
from cellspec.core import ir
from cellspec.core.status import Reason
from cellspec.layout import layout_from_obj
from cellspec.solver.ground_size import nested_parts
from cellspec.solver.verify import check

STATION = REPO / "rules" / "cells" / "dual_arm_station.cell"
WALL = REPO / "rules" / "layouts" / "wall_9.json"
TOWER = "build a 3-cube tower at x 0.4 y 0.2"


def _bound(limit: float) -> float:
    """max(2 x limit, limit + 1 s), plus the start of an interpreter on a busy CI box."""
    return max(2 * limit, limit + 1) + 5


@pytest.mark.parametrize("verb", ["sim", "design"])
def test_a_tiny_time_limit_is_unknown_within_the_bound(tmp_path, verb):
    """A real process: the limit counts from the interpreter's start (its imports too),
    which an in-process call with every module already imported would not show."""
    cli = run_cellspec_process
    out = tmp_path / "out.json"
    args = (("sim", STATION, WALL) if verb == "sim" else
            ("design", TOWER, "--cell", STATION, "--adapter", "offline"))
    t0 = time.monotonic()
    r = cli(*args, "--time-limit", "0.3", "-o", out, "--format", "json")
    took = time.monotonic() - t0
    assert r.returncode == 2, r.stderr
    j = json.loads(r.stdout)
    assert j["verdict" if verb == "sim" else "outcome"] == "unknown"
    assert j["reason"].startswith("time limit: not finished within 0.3 s")
    assert j["reason_code"] == "time limit"
    assert not out.exists()  # the stopped worker wrote nothing; the parent writes on completion
    assert took < _bound(0.3)


def test_sim_memory_budget_is_unknown():
    """A real process: a worker forked from a test process starts with the test's heap."""
    r = run_cellspec_process("sim", STATION, WALL, "--max-memory", "64M")
    assert r.returncode == 2 and "Traceback (most recent call last)" not in r.stdout
    assert r.stdout.startswith("unknown: memory limit: the run needed more than 64 MiB")


def test_sim_outputs_are_written_by_the_parent_on_completion(cli, tmp_path):
    plan, snaps = tmp_path / "plan.json", tmp_path / "snaps"
    r = cli("sim", STATION, WALL, "--time-limit", "120", "-o", plan, "--snapshots", snaps)
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip().endswith("sim: pass")
    assert json.loads(plan.read_text())["steps"]
    assert sorted(p.name for p in snaps.iterdir()) == ["final.png", "planned.png"]
    assert (snaps / "final.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_design_in_process_counts_the_limit_from_the_call(capsys, tmp_path):
    """A library caller's main([...]) in an old process: the clock starts at the call."""
    from cellspec.cli import main

    out = tmp_path / "d.json"
    rc = main(["design", TOWER, "--cell", str(STATION), "--time-limit", "60", "-o", str(out),
               "--format", "json"])
    j = json.loads(capsys.readouterr().out)
    assert rc == 0 and j["outcome"] in ("accepted", "generated")
    assert len(json.loads(out.read_text())["parts"]) == 3


@pytest.mark.parametrize(("flags", "message"), [
    (("--solver-time-limit", "0"), "--solver-time-limit must be a positive number of seconds"),
    (("--solver-time-limit", "inf"), "--solver-time-limit must be a positive number"),
    (("--max-memory", "1K"), "--max-memory must be from 64M to 1T"),
])
@pytest.mark.parametrize("verb", ["sim", "design"])
def test_the_new_limit_flags_are_validated(capsys, verb, flags, message):
    from cellspec.cli import main

    args = (["sim", str(STATION), str(WALL)] if verb == "sim" else
            ["design", TOWER, "--cell", str(STATION)])
    assert main([*args, *flags]) == 2
    assert message in capsys.readouterr().err


# --- check() in Python: the ground size is estimated before grounding -------------------------
CHAIN = """cell t {
    units m
    workspace x [0, 1] y [0, 1] z [0, 1]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
}
rule chain "{p} {q} {r}" : forall p, q, r: (contact(p, q) and contact(q, r)) implies p.x < 0.45
"""


def _pile(n: int, spread: float = 0.1, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    pos = np.column_stack([0.45 + rng.uniform(-spread, spread, n),
                           0.45 + rng.uniform(-spread, spread, n), rng.uniform(0.025, 0.275, n)])
    return {"units": "m", "parts": [{"id": f"c{k}", "type": "cube",
                                     "pos": [round(float(v), 4) for v in xyz]}
                                    for k, xyz in enumerate(pos)]}


@pytest.fixture(scope="module")
def chain_cell(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("ground") / "chain.cell"
    p.write_text(CHAIN)
    return p


def test_dense_pile_is_refused_before_grounding(chain_cell):
    """2 000 cubes in a dense pile, a rule of three parts chained by contact: about 4.6e7
    bindings (11 GiB estimated; grounding them took minutes and gigabytes)."""
    v = check(cellspec.load_cell(str(chain_cell)), layout_from_obj(_pile(2000)))
    assert v.verdict == "unknown" and v.reason_code == Reason.GROUNDING_LIMIT
    assert v.reason.startswith("grounding limit: rule 'chain' (")
    assert "chain.cell:7:1) relates 3 parts through the layout's" in v.reason
    assert "more than the memory budget of 2048 MiB (max_memory, --max-memory) allows" in v.reason


def test_the_budget_decides_and_a_small_pile_is_still_checked(chain_cell):
    cell = cellspec.load_cell(str(chain_cell))
    small = layout_from_obj(_pile(40, spread=0.15))
    # 40^3 bindings fit in 512 MiB beside what this test process already holds (the budget
    # counts the resident heap, which a long test session grows): not estimated
    from cellspec.solver.ground_size import _resident

    tight = check(cell, small, max_memory=_resident() + 512 * 1024**2)
    assert tight.verdict == check(cell, small, backend="reference").verdict == "fail"
    assert {x.rule for x in tight.violations} == {"chain"}
    mid = layout_from_obj(_pile(1000))  # about 5.7e6 bindings, 1.4 GiB estimated
    v = check(cell, mid, max_memory=256 * 1024**2)
    assert v.verdict == "unknown" and "budget of 256 MiB" in v.reason


def test_cli_check_passes_its_budget_to_the_estimate(chain_cell, tmp_path):
    """A real process: the worker forked from a test process would inherit a heap (every
    test module's imports) that alone exceeds a 256 MiB address-space cap."""
    cli = run_cellspec_process
    lay = tmp_path / "pile.json"
    lay.write_text(json.dumps(_pile(1000)))
    r = cli("check", chain_cell, lay, "--max-memory", "256M", "--format", "json")
    j = json.loads(r.stdout)
    assert r.returncode == 2 and j["verdict"] == "unknown"
    assert j["reason_code"] == "grounding limit" and "budget of 256 MiB" in j["reason"]


def test_nested_parts_counts_the_scope_not_the_siblings():
    q = ir.Quant("exists", ("q",), "part", False, ir.BoolConst(True))
    r = ir.Quant("exists", ("r",), "part", False, ir.BoolConst(True))
    top = ir.Quant("forall", ("p",), "part", False, ir.And((q, r)))
    assert nested_parts(top) == 2  # p with q, then p with r: never three at once
    assert nested_parts(ir.Quant("forall", ("p",), "part", False, q)) == 2
    deep = ir.Quant("forall", ("p", "s"), "part", False,
                    ir.Quant("exists", ("q",), "part", False, r))
    assert nested_parts(deep) == 4

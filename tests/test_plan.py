"""Complete assembly sequencing (cellspec plan): found orders are re-verified by clingo and
the numpy reference, checked step by step against the rules, and compared with brute force
on small random layouts; infeasibility is proved."""

from __future__ import annotations

import itertools
import json
import time

import numpy as np
import pytest
from conftest import LAYOUTS, REPO, STATION, run_cli

import cellspec
from cellspec.core import geometry as g
from cellspec.layout import Layout, layout_from_obj
from cellspec.solver.cpsat.sequence import (
    greedy_sink,
    order_problem,
    plan,
    solve_order,
)
from cellspec.solver.instance import build_instance

TRAP = LAYOUTS / "sequencing" / "greedy_trap_10.json"


@pytest.fixture(scope="module")
def station():
    return cellspec.load_cell(str(STATION))


def _cubes(cells: list[tuple[int, int, int]], grippers: list[str | None] | None = None
           ) -> Layout:
    parts = []
    for k, (i, j, lv) in enumerate(cells):
        p = {"id": f"c{k}", "type": "cube",
             "pos": [round(0.30 + 0.05 * i, 4), round(0.15 + 0.05 * j, 4),
                     round(0.025 + 0.05 * lv, 4)]}
        if grippers and grippers[k]:
            p["gripper"] = grippers[k]
        parts.append(p)
    return layout_from_obj({"parts": parts})


def _step_by_step(cell, layout: Layout, steps) -> None:
    """Each step: the part's supports and lower touching parts are placed, and its chosen
    grip axis (parallel) has no placed part flanking it, by the geometry kernel."""
    inst = build_instance(cell, layout)
    idx = {pid: i for i, pid in enumerate(inst.ids)}
    b, eps = inst.boxes, inst.eps
    placed: list[int] = []
    for s in steps:
        p = idx[s.part]
        for q in range(inst.n):
            if q == p or q in placed:
                continue
            lower = g.contact(b[q], b[p], eps) and b[q, 4] < b[p, 4]
            assert not (g.supports(b[q], b[p], eps) or lower), (s.part, inst.ids[q])
        if s.gripper == "parallel":
            for q in placed:
                assert not g.flanks(b[q], b[p], s.axis, inst.opening, inst.depth, eps), \
                    (s.part, s.axis, inst.ids[q])
        placed.append(p)


def test_greedy_trap_paper_algorithm_stuck_ours_finds(station):
    lay = cellspec.load_layout(str(TRAP))
    assert greedy_sink(order_problem(build_instance(station, lay))) is None
    r = plan(station, lay)
    assert r.status == "optimal" and len(r.steps) == 10
    assert r.verdict is not None and r.verdict.verdict == "pass"
    ordered = lay.with_order(r.order)
    assert cellspec.check(station, ordered).verdict == "pass"
    assert cellspec.check(station, ordered, backend="reference").verdict == "pass"
    _step_by_step(station, lay, r.steps)


def test_cp_sat_path_finds_order_when_greedy_is_stuck(station):
    # force the exact path: the layout order as greedy key is the paper's trap
    lay = cellspec.load_layout(str(TRAP))
    inst = build_instance(station, lay)
    st, steps, method, _, _ = solve_order(station, inst, 10.0, prefer=list(range(inst.n)))
    assert st == "optimal" and method == "greedy+cp-sat"
    _step_by_step(station, lay, steps)
    assert cellspec.check(station, lay.with_order(tuple(s.part for s in steps))).ok


def test_dense_block_parallel_only_is_proved_impossible(station):
    obj = json.loads((LAYOUTS / "dense_block_12.json").read_text())
    for p in obj["parts"]:
        p.pop("gripper", None)
    r = plan(station, layout_from_obj(obj))
    assert r.status == "infeasible" and not r.steps
    assert r.conflict and "gripped" in (r.reason or "")


def test_table_v_orders(station):
    for name in ("canopy_21_roof_first", "dense_block_12", "wall_9"):
        lay = cellspec.load_layout(str(LAYOUTS / f"{name}.json"))
        r = plan(station, lay)
        assert r.status == "optimal", name
        _step_by_step(station, lay, r.steps)


def _brute(cell, lay: Layout) -> bool:
    op = order_problem(build_instance(cell, lay))
    for perm in itertools.permutations(range(op.n)):
        placed = np.zeros(op.n, dtype=bool)
        pos = {p: k for k, p in enumerate(perm)}
        ok = all(pos[p] < pos[c] for p in range(op.n) for c in op.succ[p])
        if not ok:
            continue
        for p in perm:
            if op.parallel[p] and all(any(placed[q] for q in op.block[p][k]) for k in (0, 1)):
                ok = False
                break
            placed[p] = True
        if ok:
            return True
    return False


def test_complete_against_brute_force(station):
    rng = np.random.default_rng(7)
    seen = {"optimal": 0, "infeasible": 0}
    for _ in range(60):
        n = int(rng.integers(4, 7))
        cells: set[tuple[int, int, int]] = set()
        while len(cells) < n:
            i, j = int(rng.integers(0, 3)), int(rng.integers(0, 3))
            lv = sum(1 for c in cells if c[:2] == (i, j))
            cells.add((i, j, lv))
        grippers = [("vacuum" if rng.random() < 0.2 else None) for _ in range(n)]
        lay = _cubes(sorted(cells, key=lambda c: (c[2], c[0], c[1])), grippers)
        r = plan(station, lay)
        assert r.status in ("optimal", "infeasible")
        assert (r.status == "optimal") == _brute(station, lay)
        seen[r.status] += 1
        if r.status == "optimal":
            _step_by_step(station, lay, r.steps)
            assert cellspec.check(station, lay.with_order(r.order),
                                  backend="reference").verdict == "pass"
    assert seen["optimal"] and seen["infeasible"]


def test_thousand_parts_fast(station):
    parts = []
    k = 0
    for bx in range(10):
        for by in range(10):
            for lv in range(10):  # 100 towers of 10 would leave the workspace: 5 x 2
                x = 0.21 + 0.048 * bx + 0.0 * lv
                parts.append({"id": f"p{k}", "type": "cube", "size": [0.02, 0.02, 0.02],
                              "pos": [round(x, 4), round(0.06 + 0.044 * by, 4),
                                      round(0.01 + 0.02 * lv, 4)]})
                k += 1
    lay = layout_from_obj({"parts": parts})
    inst = build_instance(station, lay)
    t0 = time.perf_counter()
    st, steps, _, _, _ = solve_order(station, inst)
    assert st == "optimal" and len(steps) == 1000
    assert time.perf_counter() - t0 < 5.0


def test_cli_plan(cli, tmp_path):
    out = tmp_path / "ordered.json"
    r = cli("plan", STATION, TRAP, "--compare", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "stuck" in r.stdout and "10 parts ordered" in r.stdout
    assert cli("check", STATION, out).returncode == 0
    r = cli("plan", STATION, TRAP, "--format", "json")
    data = json.loads(r.stdout)
    assert data["status"] == "optimal" and len(data["order"]) == 10
    assert all(s["axis"] in ("x", "y") for s in data["steps"])


def test_cli_plan_infeasible_exit_1(cli, tmp_path):
    obj = json.loads((LAYOUTS / "dense_block_12.json").read_text())
    for p in obj["parts"]:
        p.pop("gripper", None)
    f = tmp_path / "block.json"
    f.write_text(json.dumps(obj))
    r = cli("plan", STATION, f)
    assert r.returncode == 1 and "infeasible" in r.stdout
    r = cli("plan", STATION, f, "--time-limit", "0")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_plan_of_a_layout_that_cannot_stand_exits_1(station, tmp_path, capsys):
    # issue 28 item 5: the finished layout topples (s2 overhangs s1 by 35 mm of its 50), so
    # no order stands: a9a49c7 printed an order and exited 0 with a note
    lay = {"parts": [{"id": "s1", "type": "cube", "pos": [0.5, 0.2, 0.025]},
                     {"id": "s2", "type": "cube", "pos": [0.535, 0.2, 0.075]}]}
    r = plan(station, layout_from_obj(lay))
    assert r.status == "infeasible" and r.conflict == ("s2",) and not r.steps and r.unstable
    assert "stability(s2)" in r.reason and "no order stands" in r.reason
    f = tmp_path / "topple.json"
    f.write_text(json.dumps(lay))
    from cellspec.cli import main

    assert main(["plan", str(STATION), str(f)]) == 1
    out = capsys.readouterr().out
    assert "infeasible: the finished layout cannot stand (stability(s2))" in out
    assert "   1  s1" not in out  # no order is printed
    assert main(["plan", str(STATION), str(f), "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["status"] == "infeasible"


def test_a_layout_too_dense_to_sequence_is_unknown_not_an_internal_error(tmp_path):
    # 20 000 cubes on one heap: more candidate pairs than the broad phase allows (was exit
    # 3, "internal error: TooDense")
    import json
    import random

    from cellspec.cli import main

    rng = random.Random(2)
    parts = [{"id": f"c{k}", "type": "cube",
              "pos": [round(rng.uniform(0.2, 0.7), 4), round(rng.uniform(0.05, 0.5), 4),
                      round(rng.uniform(0.025, 0.3), 4)]} for k in range(20_000)]
    lay = tmp_path / "heap.json"
    lay.write_text(json.dumps({"units": "m", "parts": parts}))
    assert main(["plan", "rules/cells/dual_arm_station.cell", str(lay)]) == 2


def test_a_stability_limit_inside_the_order_search_is_unknown_not_an_internal_error(
        monkeypatch, tmp_path):
    """A stage's stability LP that no solver decides (time limit) ends the plan ``unknown``
    with the reason, exit 2, never exit 3."""
    from cellspec.core.status import Reason
    from cellspec.solver import stability

    def undecided(*args, **kwargs):
        raise stability.StabilityLimit("the stability LP of a 3-part structure hit its time "
                                       "limit", Reason.TIME_LIMIT)

    monkeypatch.setattr(stability, "failures", undecided)  # the first LP of the stage search
    rc, out, err = run_cli(["plan", STATION, REPO / "rules" / "examples" / "tower3.json",
                            "--format", "json"])
    assert rc == 2, (out, err)
    got = json.loads(out)
    assert got["status"] == "unknown"
    assert got["reason"] == ("time limit: the stability LP of a 3-part structure hit its time "
                             "limit")

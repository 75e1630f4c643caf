"""explain: a minimal failing core of rules and parts, mapped to rule sources."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import STATION
from smt_faults import fault_layout, inject_faults, tower_grid

import cellspec
from cellspec.layout import layout_from_obj
from cellspec.solver.formal.explain import explain
from cellspec.solver.verify import check

REPO_EXAMPLES = STATION.parent.parent / "examples"
BIG_CELL = """\
import physical
cell big {
    workspace x [0, 2] y [0, 2] z [0, 1]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
    default gripper parallel opening 0.07 depth 0.02
}
"""


@pytest.fixture(scope="module")
def big_cell(tmp_path_factory):
    p = tmp_path_factory.mktemp("big") / "big.cell"
    p.write_text(BIG_CELL)
    return cellspec.load_cell(str(p))


def test_tower3_broken(station_cell):
    lay = cellspec.load_layout(str(REPO_EXAMPLES / "tower3_broken.json"))
    e = explain(station_cell, lay, max_causes=5)
    assert e.status == "explained" and e.minimal
    assert [r.rule for r in e.rules] == ["no_overlap"] and e.parts == ("c1", "c2")
    assert e.rules[0].source == "cellspec/rules/physical.cell:11:1"
    assert e.total_violations == 5
    assert [c.parts for c in e.causes] == [("c1", "c2"), ("c3",)]


def test_passing_layout_has_nothing_to_explain(station_cell):
    e = explain(station_cell, cellspec.load_layout(str(REPO_EXAMPLES / "tower3.json")))
    assert e.status == "pass" and not e.rules


def test_200_parts_40_injected(big_cell):
    lay = layout_from_obj(fault_layout(40))
    v = check(big_cell, lay)
    assert v.verdict == "fail" and len(v.violations) >= 40
    e = explain(big_cell, lay, max_causes=100)
    assert e.status == "explained"
    assert all(c.minimal for c in e.causes)
    seen: set[str] = set()
    for c in e.causes:
        assert len(c.parts) <= 4 and not (seen & set(c.parts))  # small and disjoint
        seen |= set(c.parts)
        sub = layout_from_obj({"parts": [p for p in lay.to_json()["parts"]
                                         if p["id"] in c.parts]})
        rules = tuple(r for r in big_cell.rules if r.name in {x.rule for x in c.rules})
        sub_cell = big_cell.model_copy(update={"rules": rules})
        if not any(r.name in ("support_order", "grip_access") for r in rules):
            assert check(sub_cell, sub, backend="reference").verdict == "fail"
    assert len(e.causes) >= 20  # many independent root causes among 40 injections


def test_random_cores_fail_under_the_reference(station_cell):
    rng = np.random.default_rng(3)
    for _ in range(15):
        obj = inject_faults(tower_grid(3, 2, 2, gap=0.002), int(rng.integers(1, 4)),
                     seed=int(rng.integers(1000)))
        for p in obj["parts"]:
            p["pos"][0] = round(p["pos"][0] + 0.15, 4)
        lay = layout_from_obj(obj)
        e = explain(station_cell, lay)
        if e.status == "pass":
            continue
        assert e.status == "explained" and e.minimal
        keep = set(e.parts)
        sub = layout_from_obj({"parts": [p for p in obj["parts"] if p["id"] in keep],
                               "order": [i for i in obj["order"] if i in keep]})
        names = {r.rule for r in e.rules}
        sub_cell = station_cell.model_copy(update={"rules": tuple(
            r for r in station_cell.rules if r.name in names)})
        assert check(sub_cell, sub, backend="reference").verdict == "fail"


def test_cli_explain(cli):
    r = cli("explain", STATION, REPO_EXAMPLES / "tower3_broken.json", "--causes", "3")
    assert r.returncode == 1, r.stderr
    assert "cellspec/rules/physical.cell:11:1: rule no_overlap" in r.stdout
    r = cli("explain", STATION, REPO_EXAMPLES / "tower3_broken.json", "--format", "json")
    out = json.loads(r.stdout)
    assert out["status"] == "explained" and out["parts"] == ["c1", "c2"]
    r = cli("explain", STATION, REPO_EXAMPLES / "tower3.json")
    assert r.returncode == 0 and "pass" in r.stdout
    r = cli("explain", STATION, REPO_EXAMPLES / "nope.json")
    assert r.returncode == 2 and "Traceback" not in r.stderr

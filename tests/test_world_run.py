"""The closed loop in the physics simulation: commit, roll back, diagnose, recover."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cellspec.core.errors import CellspecError
from cellspec.dsl.parser import load_cell
from cellspec.layout import load_layout
from cellspec.world.db import WorldRelation, open_world
from cellspec.world.run import parse_faults, run_layout
from tests.conftest import REPO, STATION, run_cellspec

LAYOUT = REPO / "rules" / "world" / "tower_row.json"


@pytest.fixture(scope="module")
def cell():  # noqa: ANN201
    return load_cell(STATION)


@pytest.fixture(scope="module")
def layout():  # noqa: ANN201
    return load_layout(LAYOUT)


def _lines(r) -> list[tuple]:  # noqa: ANN001
    return [(s.label, s.kind, s.part, s.outcome,
             s.causes[0]["cause"] if s.causes else None, s.recovery) for s in r.steps]


def test_normal_run_commits_every_action(cell, layout, tmp_path: Path) -> None:  # noqa: ANN001
    r = run_layout(cell, layout, tmp_path / "w.db", seed=3)
    assert r.success and [s.outcome for s in r.steps] == ["committed"] * 8
    assert r.max_error < 0.003
    with open_world(tmp_path / "w.db") as w:
        assert [e.id for e in w.entities()] == ["c1", "c2", "c3", "c4"]
        assert all(e.lifecycle == "Active" for e in w.entities())
        rels = set(w.relations())
        assert {WorldRelation("on", "c2", "c1"), WorldRelation("on", "c1", "table"),
                WorldRelation("on", "c3", "table"), WorldRelation("on", "c4", "table")} <= rels
        assert w.cs() == ("idle", None) and w.current_task() is None
        assert [h["outcome"] for h in w.history()][-1] == "success"


def test_faults_are_diagnosed_and_recovered(cell, layout) -> None:  # noqa: ANN001
    r = run_layout(cell, layout, None, faults=parse_faults("slip@3,obstacle@6,moved@7"),
                   engine="arm")
    assert r.success, r.reason
    assert r.engine == "arm" and "robot arm irb1600" in r.note
    assert _lines(r) == [
        ("1", "pick", "c1", "committed", None, None),
        ("2", "place", "c1", "committed", None, None),
        ("3", "pick", "c2", "rolled_back", "slip", "regrasp"),
        ("3.1", "pick", "c2", "committed", None, None),
        ("3.2", "place", "c2", "committed", None, None),
        ("5", "pick", "c3", "committed", None, None),
        ("6", "place", "c3", "rolled_back", "obstacle", "replan_keepout"),
        ("6.1", "place", "c3", "committed", None, None),  # still in hand: over the keep-out
        ("7", "pick", "c4", "committed", "moved", "retarget"),
        ("8", "place", "c4", "committed", None, None),
        ("7.1", "pick", "c2", "committed", None, None),
        ("7.2", "place", "c2", "committed", None, None),
    ]
    assert r.first_diagnosis == {"slip@3": "slip", "obstacle@6": "obstacle",
                                 "moved@7": "moved"}
    assert r.steps[2].failed == ("track_error <= 0.005",)
    assert r.steps[6].failed[0] == "controller_ok"  # the protective stop
    assert r.steps[6].failed[-1] == "not event(collision)"
    assert len(r.recovery_times) == 3 and all(t > 0 for t in r.recovery_times)
    # the same input gives the same output
    again = run_layout(cell, layout, None, faults=parse_faults("slip@3,obstacle@6,moved@7"),
                       engine="arm")
    assert json.dumps(again.to_json()) == json.dumps(r.to_json())


def test_baselines(cell, layout) -> None:  # noqa: ANN001
    slip = parse_faults("slip@4")
    blind = run_layout(cell, layout, None, faults=slip, mode="blind")
    assert not blind.success and blind.steps[3].recovery == "retry as is"
    assert run_layout(cell, layout, None, faults=slip, mode="nodiag").success
    obst = run_layout(cell, layout, None, faults=parse_faults("obstacle@6"), mode="nodiag")
    assert not obst.success and "gave up on c3" in obst.reason
    assert {s.recovery for s in obst.steps if s.recovery} == {"restart"}
    moved = run_layout(cell, layout, None, faults=parse_faults("moved@5"), mode="nodiag")
    assert not moved.success and "off its target" in moved.reason  # never noticed


@pytest.mark.parametrize("text, msg", [
    ("slip@0", "bad item 'slip@0'"), ("drop@3", "bad item 'drop@3'"),
    ("slip@3,moved@3", "at most one fault per action"),
])
def test_bad_fault_lists(text: str, msg: str) -> None:
    with pytest.raises(CellspecError, match=msg):
        parse_faults(text)


def test_cli_run_world_and_refusals(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    r = run_cellspec("run", STATION, LAYOUT, "--world", db, "--faults", "slip@2", "--engine",
                     "gripper")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("NOTE: actions are executed by a KINEMATIC GRIPPER BODY")
    assert "     2  place c1     rolled back" in r.stdout and "slip(c1) -> regrasp" in r.stdout
    assert "summary: built" in r.stdout
    # a database that already holds a run is refused, unchanged
    before = db.read_bytes()
    r2 = run_cellspec("run", STATION, LAYOUT, "--world", db, "--format", "json")
    assert r2.returncode == 2 and "already holds a run" in r2.stderr and r2.stdout == ""
    assert db.read_bytes() == before
    r3 = run_cellspec("world", "history", db, "--format", "json")
    hist = json.loads(r3.stdout)
    diag = [h for h in hist if h["action"] == "diagnosis"]
    assert [(h["cause"], h["recovery"]) for h in diag] == [("slip(c1)", "regrasp")]
    r5 = run_cellspec("world", "trace", db, REPO / "rules" / "world" / "trace_unknown.json")
    assert r5.returncode == 2 and "action object 'c9' is not an entity" in r5.stdout
    assert db.read_bytes() == before  # reading and validating write nothing
    junk = tmp_path / "junk.db"
    junk.write_text("hello")
    r4 = run_cellspec("world", "show", junk)
    assert r4.returncode == 2 and "not SQLite" in r4.stderr and "Traceback" not in r4.stderr
    assert junk.read_text() == "hello"

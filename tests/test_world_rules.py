"""Commit conditions and diagnose rules: grammar, errors, clingo decisions, Δ, traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cellspec.core.errors import CellspecError
from cellspec.dsl.formatter import format_source
from cellspec.dsl.parser import load_cell
from cellspec.world.db import Entity, Transition, open_world
from cellspec.world.discrepancy import (
    cell_part_sizes,
    cell_surfaces,
    diagnose,
    load_state,
    state_from_json,
)
from cellspec.world.rules import decide_commit
from cellspec.world.trace import validate_trace
from tests.conftest import REPO, STATION, run_cellspec

EX = REPO / "rules" / "world"

CELL = """import diagnosis

cell t {
    workspace x [0, 1] y [0, 1] z [0, 1]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
    force grasp 4
}
"""


def _cell(tmp_path: Path, extra: str = "", head: str = CELL) -> object:
    p = tmp_path / "t.cell"
    p.write_text(head + extra)
    return load_cell(p)


def test_library_rules_and_thresholds_load(tmp_path: Path) -> None:
    cell = load_cell(STATION)
    assert [r.name for r in cell.world.commits] == ["pick", "place", "insert"]
    assert [r.name for r in cell.world.diagnoses] == [
        "slip", "grasp_failure", "obstacle", "moved", "collision", "lost"]
    assert {k: float(v.value) for k, v in cell.world.forces.items()} == {
        "grasp": 5.0, "collision": 15.0, "contact": 10.0}
    assert float(cell.world.forces["contact"].duration) == 0.5


def test_commit_decided_by_clingo_with_failed_conjuncts(tmp_path: Path) -> None:
    cell = _cell(tmp_path)
    ok = decide_commit(cell, "pick", {"controller_ok": True, "track_error": 0.0049,
                                      "grasp_force": 4.01})
    assert ok.ok and ok.failed == () and ok.events == ()
    # the cell's own threshold (4 N) is used, not the default 5 N
    bad = decide_commit(cell, "pick", {"controller_ok": True, "track_error": 0.0051,
                                       "grasp_force": 3.99})
    assert not bad.ok
    assert bad.failed == ("track_error <= 0.005", "not event(grasp_weak)")
    assert bad.events == ("grasp_weak",)
    # place: contact confirmed needs F_z > 10 N for 0.5 s
    base = {"controller_ok": True, "target_error": 0.001, "speed": 0.0, "ext_force": 1.0,
            "contact_force": 12.0}
    assert decide_commit(cell, "place", {**base, "contact_time": 0.5}).ok
    short = decide_commit(cell, "place", {**base, "contact_time": 0.49})
    assert short.failed == ("event(contact)",)
    hit = decide_commit(cell, "place", {**base, "contact_time": 0.6, "ext_force": 15.5})
    assert hit.failed == ("not event(collision)",)
    # a missing measure makes its comparison false (never a silent pass)
    unmeasured = decide_commit(cell, "pick", {"controller_ok": True})
    assert not unmeasured.ok
    assert unmeasured.failed == ("track_error <= 0.005 (not measured: track_error)",)


def test_user_rules_override_the_library(tmp_path: Path) -> None:
    cell = _cell(tmp_path, """
commit pick "looser" :
    controller_ok and track_error <= 0.008

diagnose slip(o) "site slip {o}" recover regrasp priority 1 :
    missing(holding, gripper, o)
""")
    assert decide_commit(cell, "pick", {"controller_ok": True, "track_error": 0.007}).ok
    slip = [r for r in cell.world.diagnoses if r.name == "slip"]
    assert len(slip) == 1 and slip[0].message == "site slip {o}" and slip[0].priority == 1
    assert slip[0].source.file.endswith("t.cell")


@pytest.mark.parametrize("extra, message", [
    ('commit lift "x" : controller_ok', "unknown action kind 'lift' (actions: pick, place"),
    ('commit pick "x" : track_error', "'track_error' is a number: compare it"),
    ('commit pick "x" : grip_force > 3', "unknown measure 'grip_force'"),
    ('commit pick "x" : grasp_force > squeeze', "unknown threshold 'squeeze'"),
    ('commit pick "x" : event(boom)', "expected event(E) with E one of grasp_weak"),
    ('diagnose s(o) "x" recover pray : new(o)', "unknown recovery 'pray'"),
    ('diagnose s(o) "x" recover stop : new(o) and missing(touching, o, _)',
     "unknown relation 'touching'"),
    ('diagnose s(o) "x" recover stop : cs(flying, idle) and new(o)', "unknown phase 'flying'"),
    ('diagnose s(o) "x" recover stop : not new(o)', "variable 'o' must appear in a positive"),
    ('diagnose s(o) "x" recover stop : new(x)', "parameter 'o' is not bound"),
    ('diagnose s(o) "{p} x" recover stop : new(o)', "placeholder {p} names no parameter"),
    ('diagnose s(o) "x" recover stop : newish(o)', "unknown pattern 'newish'"),
    ('diagnose s(o) "x" recover stop : forall p: new(o)', "quantifiers are not used"),
    ("cell u { workspace x [0, 1] y [0, 1] z [0, 1] force squeeze 3 }",
     "unknown force threshold 'squeeze'"),
])
def test_bad_rules_are_reported_with_location(tmp_path: Path, extra: str, message: str) -> None:
    head = CELL if not extra.startswith("cell") else "import diagnosis\n"
    with pytest.raises(CellspecError) as ei:
        _cell(tmp_path, "\n" + extra + "\n", head=head)
    d = ei.value.diagnostics[0]
    assert message in d.message
    assert d.file.endswith("t.cell") and d.line > 0 and d.col > 0


def test_a_nested_or_of_constants_is_reported_not_a_crash(tmp_path: Path) -> None:
    """A nested `or` with no located term (constants only) is the conjunction error, at
    the diagnose statement (it has no location of its own; it raised a TypeError before)."""
    with pytest.raises(CellspecError) as ei:
        _cell(tmp_path, '\ndiagnose s(o) "x" recover stop : new(o) and not (true or false)\n')
    d = ei.value.diagnostics[0]
    assert "a diagnose pattern is a conjunction of literals" in d.message
    diag_line = (CELL + "\n").count("\n") + 1  # the diagnose statement's line
    assert d.file.endswith("t.cell") and (d.line, d.col) == (diag_line, 1)


def test_world_statements_format_canonically(tmp_path: Path) -> None:
    messy = ('import diagnosis\ncell t {workspace x [0, 1] y [0, 1] z [0, 1]\n'
             'force   contact 10   for 0.5}\n'
             'diagnose  slip( o ) "m {o}"  recover regrasp priority 3:\n'
             '  missing(holding,gripper,o)  and cs(_,idle)\n'
             'commit pick "c":controller_ok\n')
    out = format_source(messy)
    assert out == ('import diagnosis\n\ncell t {\n    workspace x [0, 1] y [0, 1] z [0, 1]\n'
                   '    force contact 10 for 0.5\n}\n\n'
                   'diagnose slip(o) "m {o}" recover regrasp priority 3 :\n'
                   '    missing(holding, gripper, o) and cs(_, idle)\n\n'
                   'commit pick "c" : controller_ok\n')
    assert format_source(out) == out
    for f in [REPO / "cellspec" / "rules" / "diagnosis.cell", *EX.glob("*.cell")]:
        text = f.read_text()
        assert format_source(text) == text, f


def _diag(cell_path: Path, name: str) -> object:
    cell = load_cell(cell_path)
    s, z = cell_surfaces(cell), cell_part_sizes(cell)
    return diagnose(cell, load_state(str(EX / f"{name}_expected.json"), s, z),
                    load_state(str(EX / f"{name}_observed.json"), s, z))


@pytest.mark.parametrize("name, cause, args, recovery", [
    ("slip", "slip", ("c2",), "regrasp"),
    ("moved", "moved", ("c2",), "retarget"),
    ("obstacle", "obstacle", ("new1",), "replan_keepout"),
    ("grasp", "grasp_failure", ("c1",), "regrasp_other_axis"),
])
def test_examples_diagnose_their_cause(name: str, cause: str, args: tuple[str, ...],
                                       recovery: str) -> None:
    dg = _diag(STATION, name)
    assert dg.status == "diagnosed"
    assert [(f.cause, f.args, f.recovery) for f in dg.findings] == [(cause, args, recovery)]


def test_slip_delta_is_exact() -> None:
    d = _diag(STATION, "slip").delta
    assert d.cs_expected == ("transporting", "c2") and d.cs_observed == ("idle", None)
    assert [str(r) for r in d.missing] == ["holding(gripper, c2)"]
    assert [str(r) for r in d.unexpected] == ["on(c2, table)"]
    assert d.drift["c2"] == pytest.approx(0.17648, abs=1e-4) and d.drift["c1"] < 0.001
    assert d.new == () and d.lost == ()


def test_two_causes_are_both_reported_ranked() -> None:
    dg = _diag(EX / "ambiguous.cell", "slip")
    assert dg.status == "ambiguous" and dg.ambiguous == ("c2",)
    assert [(f.cause, f.priority) for f in dg.findings] == [("slip", 10), ("dropped", 3)]
    r = run_cellspec("diagnose", EX / "ambiguous.cell", EX / "slip_expected.json",
                     EX / "slip_observed.json", "--format", "json")
    assert r.returncode == 2, r.stderr
    out = json.loads(r.stdout)
    assert [c["cause"] for c in out["causes"]] == ["slip", "dropped"]
    assert "derive 2 causes for c2 (slip, dropped)" in r.stderr


def test_no_discrepancy_and_bad_states(tmp_path: Path) -> None:
    cell = load_cell(STATION)
    s, z = cell_surfaces(cell), cell_part_sizes(cell)
    st = {"objects": [{"id": "c1", "type": "cube", "pos": [0.4, 0.2, 0.025]}]}
    a = state_from_json(st, "e.json", s, z)
    assert diagnose(cell, a, a).status == "none"
    with pytest.raises(CellspecError, match="NaN"):
        state_from_json({"objects": [{"type": "cube", "pos": [float("nan"), 0, 0]}]},
                        "o.json", s, z)
    with pytest.raises(CellspecError, match="unknown entity 'c9'"):
        state_from_json({**st, "relations": ["on(c9, table)"]}, "o.json", s, z)
    with pytest.raises(CellspecError, match="unknown relation 'under'"):
        state_from_json({**st, "relations": ["under(c1, table)"]}, "o.json", s, z)
    p = tmp_path / "nan.json"
    p.write_text('{"objects": [{"type": "cube", "pos": [NaN, 0, 0]}]}')
    with pytest.raises(CellspecError, match="NaN"):
        load_state(str(p), s, z)


def test_trace_three_stages(tmp_path: Path) -> None:
    with open_world(tmp_path / "w.db", create=True) as w:
        c1 = Entity(id="c1", type="cube", pos=(0.4, 0.2, 0.025), size=(0.05,) * 3)
        c2 = Entity(id="c2", type="cube", pos=(0.4, 0.2, 0.075), size=(0.05,) * 3)
        c3 = Entity(id="c3", type="cube", pos=(0.42, 0.2, 0.125), size=(0.05,) * 3)
        c5 = Entity(id="c5", type="cube", pos=(0.42, 0.4, 0.125), size=(0.05,) * 3)
        w.transition(Transition("init", "*", upserts=[c1, c2, c3, c5], cs=("idle", None)))
        base = {"action": {"kind": "pick", "object": "c2"}, "assumption": "a",
                "confidence": 0.8}
        assert validate_trace({**base, "belief": ["on(c2, c1)", "on(c1, table)"]}, w).accepted
        v = validate_trace({**base, "confidence": 1.5, "belief": []}, w)
        assert (v.accepted, v.stage) == (False, "syntax") and "confidence" in v.reasons[0]
        v = validate_trace({**base, "belief": ["on(c2, c7)"]}, w)
        assert (v.stage, v.reasons) == ("semantics", ("on(c2, c7) names unknown entity 'c7'",))
        # c3's centroid (x 0.42) lies over c2's footprint (x up to 0.425): on holds
        assert validate_trace({**base, "belief": ["on(c3, c2)"]}, w).accepted
        w.transition(Transition("drift", "c3", upserts=[
            Entity(id="c3", type="cube", pos=(0.445, 0.2, 0.125), size=(0.05,) * 3)]))
        # footprints still overlap by 5 mm, but the centroid is 20 mm past the edge
        v = validate_trace({**base, "belief": ["on(c3, c2)"]}, w)
        assert v.stage == "physics" and "centroid" in v.reasons[0]
        v = validate_trace({**base, "belief": ["on(c1, c2)", "holding(gripper, c2)"]}, w)
        assert v.stage == "physics" and len(v.reasons) == 2


# a program clingo cannot decide quickly: 13 pigeons in 12 holes (exponential for CDCL)
_PIGEONS = """
pigeon(1..13). hole(1..12).
1 { in(P, H) : hole(H) } 1 :- pigeon(P).
:- hole(H), #count { P : in(P, H) } > 1.
"""


def test_world_rules_run_by_the_one_clingo_runner_under_a_time_limit(tmp_path: Path) -> None:
    from cellspec.core.status import Reason
    from cellspec.solver.asp.backend import solve_program
    from cellspec.world.rules import Undecided, diagnose_facts

    res = solve_program([_PIGEONS], 0.1)
    assert res.satisfiable is None and res.reason is Reason.TIME_LIMIT
    assert res.message == "clingo did not finish within 0.1 s"
    assert solve_program(["a. :- a."], 5.0).satisfiable is False
    cell = _cell(tmp_path)
    # the diagnose program grounds the Δ facts it is given: here a hard one, so the limit
    # is reached and the answer is unknown (exit 2), never an empty list of causes
    delta = 'lost("c2").\ntarget("c1").\nm(grasp_force, 100).'  # 1 N: below the 4 N grasp
    with pytest.raises(Undecided) as exc:
        diagnose_facts(cell, delta + _PIGEONS, timeout=0.1)
    assert exc.value.reason is Reason.TIME_LIMIT
    assert exc.value.diagnostics[0].message == (
        f"unknown (time limit): the diagnose rules of {cell.path}: clingo did not finish "
        "within 0.1 s")
    found = diagnose_facts(cell, delta)  # events.lp derives grasp_weak from the threshold
    assert [(f.cause, f.args) for f in found] == [("grasp_failure", ("c1",)), ("lost", ("c2",))]

"""No hidden state: what a check derives from an instance is declared on it (never written
onto the frozen object), and the caches a long-lived process keeps are keyed by content, so
an edited cell gives the new verdict in the same process."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from cellspec.agent.base import parse_spec
from cellspec.agent.loop import content_key, reference
from cellspec.dsl.parser import load_cell
from cellspec.layout import load_layout
from cellspec.review.session import ReviewSession
from cellspec.solver import checkers, undecided
from cellspec.solver.instance import Instance, build_instance
from tests.conftest import REPO, STATION

TOWER = REPO / "rules" / "examples" / "tower3.json"  # three cubes, top at 0.15 m


def test_a_check_writes_only_declared_fields(station_cell) -> None:
    lay = load_layout(TOWER)
    inst = build_instance(station_cell, lay)
    rules, _ = checkers.order_rules(station_cell.rules, lay.order is not None)
    res, open_ = undecided.violations(checkers.get("clingo"), inst, rules, None)
    assert res.status == "done" and res.violations == () and open_ == ()
    assert set(vars(inst)) == {f.name for f in dataclasses.fields(Instance)}
    assert inst.derived.stability_report is not None and inst.derived.near_pairs is not None
    assert inst.derived.stability_tolerant
    fresh = dataclasses.replace(inst)  # a derived instance derives its own data
    assert fresh.derived.stability_report is None and not fresh.derived.stability_tolerant


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    """The station written to ``tmp_path`` (the same path each time) with one edit."""
    path = tmp_path / "station.cell"
    text = STATION.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return path


def test_reference_build_follows_an_edited_cell_at_the_same_path(tmp_path: Path) -> None:
    spec = parse_spec("design t { tower(n=3) at (0.40, 0.20) }")
    ws = "workspace x [0.20, 0.70] y [0.05, 0.50] z [0.00, 0.30]"
    first = load_cell(str(_edited(tmp_path, ws, ws)))
    assert reference(first, spec, 10.0).parts == 3
    low = load_cell(str(_edited(tmp_path, ws, ws.replace("0.30]", "0.10]"))))
    assert (low.path, low.name) == (first.path, first.name)
    assert content_key(low) != content_key(first)
    again = reference(low, spec, 10.0)  # not the first cell's build
    assert again.layout is None and again.result.status == "infeasible"
    assert content_key(load_cell(str(_edited(tmp_path, ws, ws)))) == content_key(first)


def test_review_session_sees_an_edited_cell_in_the_same_process(tmp_path: Path) -> None:
    lay = load_layout(TOWER)
    before = ReviewSession(load_cell(str(_edited(tmp_path, "import physical",
                                                          "import physical"))), lay)
    assert before.verdict.verdict == "pass"
    rule = ('import physical\n\nrule low "{p} is too high: {p.top}" :\n'
            '    forall p in cube: p.top <= 0.12\n')
    after = ReviewSession(load_cell(str(_edited(tmp_path, "import physical", rule))), lay)
    assert after.verdict.verdict == "fail"
    assert [(v.rule, v.parts) for v in after.verdict.violations] == [("low", ("c3",))]
    moved = after.move("c3", [0.50, 0.20, 0.025])  # an edit re-verifies against the new rules
    assert moved.ok and after.verdict.verdict == "pass"
    assert before.move("c3", [0.50, 0.20, 0.025]).ok and before.verdict.verdict == "pass"


def test_every_solver_limit_is_one_root_with_its_reason() -> None:
    from cellspec.core.geometry import TooDense
    from cellspec.core.status import Reason, SolverLimit
    from cellspec.solver.asp.arith import TooWide
    from cellspec.solver.asp.compile import CompileError
    from cellspec.solver.smt.backend import Unsupported, Z3Unknown
    from cellspec.solver.smt.ground import GroundingLimit, NotInFragment
    from cellspec.solver.smt.shapes import NotLinear
    from cellspec.solver.stability import StabilityLimit
    from cellspec.solver.stability_lp import LPLimit
    from cellspec.world.rules import Undecided

    made = {TooDense(9, 4): Reason.DENSITY_LIMIT, TooWide("x"): Reason.UNSUPPORTED,
            CompileError("x"): Reason.UNSUPPORTED, Unsupported("x"): Reason.UNSUPPORTED,
            Z3Unknown("x"): Reason.TIME_LIMIT, GroundingLimit("x"): Reason.GROUNDING_LIMIT,
            NotInFragment("x"): Reason.UNSUPPORTED, NotLinear("x"): Reason.UNSUPPORTED,
            StabilityLimit("x"): Reason.GROUNDING_LIMIT,
            StabilityLimit("x", Reason.TIME_LIMIT): Reason.TIME_LIMIT,
            LPLimit([("GLOP", "ABNORMAL")], False): Reason.SOLVER_FAILURE,
            LPLimit([("GLOP", "LIMIT")], True): Reason.TIME_LIMIT,
            Undecided("commit", "slow"): Reason.TIME_LIMIT,
            Undecided("commit", "big", Reason.GROUNDING_LIMIT): Reason.GROUNDING_LIMIT}
    for exc, reason in made.items():
        assert isinstance(exc, SolverLimit) and exc.reason is reason, type(exc).__name__
    assert str(TooDense(9, 4)) == "9 candidate pairs (limit 4)"
    assert str(Undecided("commit", "slow")) == "cellspec: error: unknown (time limit): commit: slow"
    try:
        SolverLimit("no reason")
    except TypeError as exc:
        assert "needs a reason" in str(exc)
    else:
        raise AssertionError("a SolverLimit without a reason was accepted")


def test_review_mesh_cache_reads_a_mesh_edited_on_disk(tmp_path: Path) -> None:
    pytest.importorskip("trimesh")
    from cellspec.review import robots as rr

    obj = tmp_path / "link.obj"

    def write(x: float, when: int) -> None:
        obj.write_text(f"v 0 0 0\nv {x} 0 0\nv 0 1 0\nf 1 2 3\n")
        os.utime(obj, ns=(when, when))

    write(1.0, 10**18)
    v, f = rr._primitive(rr._GEOM_MESH, (2.0, 2.0, 2.0), str(obj))
    assert v[:, 0].max() == 2.0 and f.tolist() == [[0, 1, 2]]
    write(3.0, 10**18 + 10**9)  # the same path, edited
    v, _ = rr._primitive(rr._GEOM_MESH, (2.0, 2.0, 2.0), str(obj))
    assert v[:, 0].max() == 6.0
    assert rr._primitive(rr._GEOM_MESH, (1.0, 1.0, 1.0), str(tmp_path / "gone.obj")) is None

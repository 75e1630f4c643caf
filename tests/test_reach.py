"""Language version 2 end to end: the robot domain and reachable(p, r) on every backend
(exact at the boundary, the same violations everywhere), the formal checks and CP-SAT
refusing it by name, consts and predicates meaning what they spell out."""

from __future__ import annotations

from pathlib import Path

import pytest

import cellspec
from cellspec.core.status import Status
from cellspec.layout import layout_from_obj
from cellspec.solver.verify import check

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ("clingo", "reference", "z3")

# a 3-4-5 triangle: a grasp point at (0.3, 0.4, 0.01) is exactly 0.5 m from the base
CELL = """
cell c {
    workspace x [-1, 1] y [-1, 1] z [0, 1]
    surface table z 0
    part chip size (0.02, 0.02, 0.02)
    robot arm model panda base (0, 0, 0.01) reach 0.5 gripper vacuum
    robot boxed model panda base (0, 0, 0) gripper vacuum
    robot free model panda base (5, 5, 0) gripper vacuum
    reachable boxed x [0.1, 0.3] y [0.1, 0.4] z [0, 0.5]
}
rule arm "{p} is out of the arm's reach" : forall p: reachable(p, arm)
rule boxed "{p} is out of boxed's box" : forall p: reachable(p, boxed)
rule everyone "{r} cannot reach {p}" : forall r in robot: forall p: reachable(p, r)
rule anyone "{p} is reachable by nobody" : forall p: exists r in robot: reachable(p, r)
"""


@pytest.fixture(scope="module")
def cell(tmp_path_factory):
    p = tmp_path_factory.mktemp("reach") / "c.cell"
    p.write_text(CELL)
    return cellspec.load_cell(str(p))


def _check(cell, x: float, y: float, backend: str):
    layout = layout_from_obj({"parts": [{"id": "a", "type": "chip", "pos": [x, y, 0.0]}]},
                             "<t>")
    v = check(cell, layout, backend=backend)
    return v, {(w.rule, w.parts, w.zones) for w in v.violations}


@pytest.mark.parametrize("backend", BACKENDS)
def test_reach_distance_is_exact_at_the_boundary(cell, backend):
    _, on = _check(cell, 0.3, 0.4, backend)  # exactly 0.5 m: reachable
    assert ("arm", ("a",), ()) not in on
    _, past = _check(cell, 0.3001, 0.4, backend)  # 0.1 mm further: not
    assert ("arm", ("a",), ()) in past
    assert ("everyone", ("a",), ("arm",)) in past


@pytest.mark.parametrize("backend", BACKENDS)
def test_reach_box_is_inclusive_and_no_declared_limit_reaches_everywhere(cell, backend):
    _, inside = _check(cell, 0.3, 0.4, backend)  # on the box's corner
    assert ("boxed", ("a",), ()) not in inside
    v, out = _check(cell, 0.3001, 0.2, backend)
    assert ("boxed", ("a",), ()) in out
    # `free` declares neither reach nor box: it reaches the point, so someone does
    assert not any(r == "anyone" for r, _, _ in out)
    assert not any(z == ("free",) for _, _, z in out)
    # the robot variable of the outer forall names the violation, robot first
    assert {z for r, _, z in out if r == "everyone"} == {("boxed",)}  # arm: 0.36 m
    assert v.verdict == Status.FAIL


def test_reach_rule_on_the_bundled_station(cli, tmp_path):
    proc = cli("test", "rules/scenarios/reach.cell", "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lay = tmp_path / "far.json"
    lay.write_text('{"parts": [{"id": "c", "type": "cube", "pos": [0.65, 0.2, 0.025], '
                   '"gripper": "vacuum"}]}')
    proc = cli("check", "rules/scenarios/reach.cell", lay, "--format", "json")
    assert proc.returncode == 1
    assert '"vacuum_reach"' in proc.stdout and '"reach"' not in proc.stdout


def test_robust_and_lint_refuse_reachable_by_name(cell):
    layout = layout_from_obj({"parts": [{"id": "a", "type": "chip", "pos": [0.2, 0.2, 0.0]}]},
                             "<t>")
    assert check(cell, layout).verdict == Status.PASS
    r = cellspec.prove_robust(cell, layout, 0.001)
    assert r.status == Status.UNKNOWN and r.reason.startswith("unsupported:")
    assert "'arm'" in r.reason and "reachable" in r.reason
    lint = cellspec.lint(cell, {"chip": 2})
    assert lint.status == "unknown" and lint.reason.startswith("unsupported:")
    assert "'anyone'" in lint.reason


def test_explain_decides_reachable(cell):
    layout = layout_from_obj({"parts": [{"id": "a", "type": "chip", "pos": [0.9, 0.9, 0.0]}]},
                             "<t>")
    e = cellspec.explain(cell, layout)
    assert e.status == "explained" and e.parts == ("a",)


def test_repair_and_generate_refuse_the_reach_rule_by_name():
    cell = cellspec.load_cell(str(ROOT / "rules/scenarios/reach.cell"))
    far = layout_from_obj({"parts": [{"id": "c", "type": "cube", "pos": [0.65, 0.2, 0.025],
                                      "gripper": "vacuum"}]}, "<t>")
    res = cellspec.repair(cell, far, time_limit=5)
    assert res.status == Status.UNKNOWN and "vacuum_reach" in (res.reason or "")
    # an overlap whose least move may push a suction part past the IRB120's 0.58 m: CP-SAT
    # does not encode reach; the constructive repair (issue 29) moves a back (towards the
    # robot), which re-verifies, and the pipeline hinted with it keeps that: a repair,
    # checked here (before issue 29: unknown, "vacuum_reach(b)")
    edge = layout_from_obj({"parts": [
        {"id": "a", "type": "cube", "pos": [0.54, 0.2, 0.025], "gripper": "vacuum"},
        {"id": "b", "type": "cube", "pos": [0.545, 0.2, 0.025], "gripper": "vacuum"}]}, "<t>")
    res = cellspec.repair(cell, edge, time_limit=5)
    assert res.status in (Status.OPTIMAL, Status.FEASIBLE), res.reason
    assert cellspec.check(cell, layout_from_obj(res.layout)).verdict == "pass"


def test_generate_never_reports_a_layout_that_breaks_reach(tmp_path):
    p = tmp_path / "g.cell"
    p.write_text("""import physical
cell g {
    workspace x [0.20, 0.70] y [0.05, 0.50] z [0.00, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
    robot short model panda base (0, 0, 0) reach 0.1 gripper parallel opening 0.07 depth 0.02
}
rule reach "{p} is beyond every robot" : forall p: exists r in robot: reachable(p, r)
design d {
    tower(n=2) at (0.40, 0.20)
}
""")
    cell = cellspec.load_cell(str(p))
    res = cellspec.generate(cell, str(p))
    assert res.status == Status.UNKNOWN and "reach(" in (res.reason or "")


def test_predicate_means_its_written_out_condition(tmp_path):
    head = """
cell c {
    workspace x [0, 1] y [0, 1] z [0, 1]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
}
"""
    short = tmp_path / "short.cell"
    short.write_text(head + "const LIFT = 0.01\n"
                     "predicate held(p) : grounded(p) or exists q: supports(q, p)\n"
                     "predicate low(p) : p.bottom <= LIFT\n"
                     'rule r "{q}" : forall q: held(q) and low(q)\n')
    long = tmp_path / "long.cell"
    long.write_text(head + 'rule r "{q}" : forall q: (grounded(q) or exists q2: '
                    "supports(q2, q)) and q.bottom <= 0.01\n")
    a, b = cellspec.load_cell(str(short)), cellspec.load_cell(str(long))
    obj = {"parts": [{"id": "a", "type": "cube", "pos": [0.5, 0.5, 0.025]},
                     {"id": "b", "type": "cube", "pos": [0.5, 0.5, 0.075]},
                     {"id": "c", "type": "cube", "pos": [0.2, 0.2, 0.2]}]}
    layout = layout_from_obj(obj, "<t>")
    for backend in BACKENDS:
        va = {(v.rule, v.parts) for v in check(a, layout, backend=backend).violations}
        vb = {(v.rule, v.parts) for v in check(b, layout, backend=backend).violations}
        assert va == vb == {("r", ("b",)), ("r", ("c",))}, backend


def test_const_in_mm_file_and_imported_from_a_metre_file(tmp_path):
    (tmp_path / "lib.cell").write_text("const GAP = 0.002\nconst N = 1\n")
    (tmp_path / "main.cell").write_text("""import "lib.cell"
const SIDE = 50
cell c {
    units mm
    workspace x [0, 1000] y [0, 1000] z [0, 1000]
    part cube size (SIDE, SIDE, SIDE)
}
rule spaced "{p}" : forall p: count(q: near(p, q, GAP)) <= N * 1
rule small "{p}" : forall p: p.size.x <= SIDE
""")
    cell = cellspec.load_cell(str(tmp_path / "main.cell"))
    from fractions import Fraction

    assert cell.part_types["cube"].size == (Fraction(1, 20),) * 3  # 50 mm
    spaced = cell.rule("spaced").body.body
    assert spaced.n == 1 and spaced.body.args[2].value == Fraction(2, 1000)  # 0.002 m
    small = cell.rule("small").body.body
    assert small.expr.const == Fraction(-1, 20)

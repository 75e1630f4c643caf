"""lint: consistency of a cell's error rules for a part set, minimal conflict sets,
rules that can never fire, rules implied by the others."""

from __future__ import annotations

import json

import pytest
from conftest import STATION

import cellspec
from cellspec.layout import layout_from_obj
from cellspec.solver.formal.lint import lint
from cellspec.solver.verify import check

INCONSISTENT = STATION.parent.parent / "examples" / "inconsistent.cell"


def _cell(tmp_path, text: str):
    p = tmp_path / "c.cell"
    p.write_text(text)
    return cellspec.load_cell(str(p)), p


def test_inconsistent_example_conflict_sets():
    r = lint(cellspec.load_cell(str(INCONSISTENT)))
    assert r.status == "inconsistent" and r.part_set == {"cube": 1}
    sets = {tuple(x.rule for x in f.rules) for f in r.findings if f.kind == "inconsistent"}
    assert sets == {("workspace", "max_height"), ("gravity", "max_height"),
                    ("workspace", "keepout")}
    srcs = {x.rule: x.source for f in r.findings for x in f.rules}
    assert srcs["max_height"] == "rules/examples/inconsistent.cell:21:1"
    assert srcs["workspace"] == "cellspec/rules/physical.cell:7:1"


@pytest.mark.parametrize("n", [1, 4, 9])
def test_station_is_consistent_and_example_passes(station_cell, n):
    r = lint(station_cell, {"cube": n})
    assert r.status == "consistent"
    v = check(station_cell, layout_from_obj(r.example))
    assert v.verdict == "pass", v.violations
    kinds = {(f.kind, f.rules[0].rule) for f in r.findings}
    assert ("never_fires", "keepout") in kinds  # the station has no keep-out zones


def test_two_types_with_order_variables(tmp_path):
    cell, _ = _cell(tmp_path, """\
import physical
cell two {
    workspace x [0, 0.5] y [0, 0.5] z [0, 0.3]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
    part slab size (0.08, 0.04, 0.02)
    default gripper parallel opening 0.07 depth 0.02
}
rule slab_on_cube "{p} is a slab on the table" : forall p in slab: not grounded(p)
""")
    r = lint(cell, {"cube": 2, "slab": 1})
    assert r.status == "consistent"
    # lint leaves the stability rules to the LP: the example satisfies every other rule
    v = check(cell, layout_from_obj(r.example))
    assert not [x for x in v.violations if not x.rule.startswith("stability")], v.violations


def test_never_fires_and_implied(tmp_path):
    cell, _ = _cell(tmp_path, """\
import physical
cell c {
    workspace x [0, 0.5] y [0, 0.5] z [0, 0.3]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
}
rule low "{p} is too high" : forall p: p.top <= 0.35
rule huge "{p} is too wide" : forall p: p.size.x < 1
""")
    r = lint(cell, {"cube": 2})
    found = {(f.kind, f.rules[0].rule) for f in r.findings}
    assert ("implied", "low") in found  # the workspace already keeps tops below 0.301
    assert ("never_fires", "huge") in found


def test_cli_lint(cli, tmp_path):
    r = cli("lint", INCONSISTENT)
    assert r.returncode == 1
    assert "rules/examples/inconsistent.cell:21:1: rule max_height" in r.stdout
    assert "inconsistent" in r.stdout
    r = cli("lint", STATION, "--parts", "cube=3", "--format", "json")
    out = json.loads(r.stdout)
    assert out["format"] == "cellspec.lint/1"  # an object, the reports inside
    rep = out["reports"]
    assert rep[0]["status"] == "consistent" and rep[0]["parts"] == {"cube": 3}


@pytest.mark.parametrize("args,msg", [
    (["--parts", "cube"], "TYPE=N"),
    (["--parts", "ball=2"], "unknown part type"),
    (["--parts", "cube=0"], "at least 1"),
    (["--timeout", "-1"], "positive"),
])
def test_cli_lint_bad_input(cli, args, msg):
    r = cli("lint", STATION, *args)
    assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr


def test_lint_without_parts(cli, tmp_path):
    _, p = _cell(tmp_path, """\
cell c {
    workspace x [0, 0.5] y [0, 0.5] z [0, 0.3]
}
rule r "{p}" : forall p: p.top <= 0.2
""")
    r = cli("lint", p)
    assert r.returncode == 2 and "no part types" in r.stderr
    _, p2 = _cell(tmp_path, """\
cell c {
    workspace x [0, 0.5] y [0, 0.5] z [0, 0.3]
    part cube size (0.05, 0.05, 0.05)
}
rule r "{p}" : forall p: p.top <= 0.2
""")
    r = cli("lint", p2)
    assert r.returncode == 2 and "--parts" in r.stderr


def test_z3_example_when_no_grid_works(tmp_path):
    # every grounded cube must carry another: a flat grid never passes, Z3 builds stacks
    cell, _ = _cell(tmp_path, """\
import physical
cell c {
    workspace x [0, 0.5] y [0, 0.5] z [0, 0.3]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
    default gripper parallel opening 0.07 depth 0.02
}
rule carry "{p} carries nothing" : forall p: grounded(p) implies exists q: supports(p, q)
""")
    from cellspec.solver.formal.lint import _grid_example

    assert _grid_example(cell, ("cube",) * 4) is None
    r = lint(cell, {"cube": 4})
    assert r.status == "consistent"
    v = check(cell, layout_from_obj(r.example))
    assert v.verdict == "pass", v.violations

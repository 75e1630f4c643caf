"""Every unknown name in a rule file says what was probably meant ("did you mean", rapidfuzz)
and lists what is known; an error in a test's `order` is reported at that line; `lint` on a
plain cell does not report the standard library's own rules unless asked."""

from __future__ import annotations

import json

import pytest
from conftest import REPO, STATION, run_cellspec, write_cell

import cellspec
from cellspec.core.errors import CellspecError
from cellspec.core.names import closest, did_you_mean, unknown

HEAD = """import physical
cell c {
    units m
    workspace x [0.2, 0.7] y [0.05, 0.5] z [0, 0.3]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    default gripper parallel opening 0.07 depth 0.02
}
"""


def errors(tmp_path_factory, text: str) -> list[str]:
    """The diagnostics of loading ``HEAD + text``, as ``line:col: message``."""
    f = write_cell(tmp_path_factory, HEAD + text)
    with pytest.raises(CellspecError) as exc:
        cellspec.load_cell(str(f))
    return [f"{d.line}:{d.col}: {d.message}" for d in exc.value.diagnostics]


def test_closest_name():
    assert closest("keepuot", ["workspace", "keepout", "gravity"]) == "keepout"
    assert closest("Cube", ["cube", "slab"]) == "cube"
    assert closest("zzz", ["workspace", "gravity"]) is None
    assert closest("cube", ["cube"]) is None  # the name itself is no suggestion
    assert did_you_mean("contct", ["contact", "supports"]) == "; did you mean 'contact'?"
    assert unknown("rule", "x", []) == "unknown rule 'x' (known: none)"


def test_unknown_rule_in_expect_lists_the_rules_and_suggests(tmp_path_factory):
    errs = errors(tmp_path_factory, """test t {
    layout {
        c1 cube at (0.4, 0.2, 0.025)
    }
    expect fail keepuot(c1)
}
""")
    assert errs == ["13:17: expected violation of unknown rule 'keepuot'; did you mean "
                    "'keepout'? (rules: gravity, grip_access, keepout, no_overlap, stability, "
                    "stability_stages, support_order, workspace)"]


def test_order_error_is_reported_at_the_order_line(tmp_path_factory):
    errs = errors(tmp_path_factory, """test t {
    layout {
        c1 cube at (0.4, 0.2, 0.025)
        c2 cube at (0.4, 0.2, 0.075)
    }
    order (c1, c3)
    expect pass
}
""")
    assert errs == ["14:5: order names part 'c3', which is not in the layout; did you mean "
                    "'c1'?"] or errs == ["14:5: order names part 'c3', which is not in the "
                                         "layout"]
    assert errs[0].startswith("14:5: ")  # the order line, not the test's first line (9)


@pytest.mark.parametrize("rule, want", [
    ('rule r "m" : forall p, q: contct(p, q) implies p.x < 1',
     "unknown relation 'contct'; did you mean 'contact'?"),
    ('rule r "m" : forall p: p.tpo < 1', "unknown attribute 'tpo'; did you mean 'top'?"),
    ('rule r "m" : forall p in cub: p.x < 1', "unknown domain 'cub'; did you mean 'cube'?"),
    ('rule r "m" : forall p: p.type == cuble', "unknown part type 'cuble'; did you mean 'cube'?"),
    ('rule r "m" : forall p: p.gripper == vaccum',
     "unknown gripper 'vaccum'; did you mean 'vacuum'?"),
    ('rule r "m" : forall p: q.x < 1', "unknown variable 'q'"),
    ('rule r "{p} at {gap(p)} {ovrlap(p, p)}" : forall p: p.x < 1',
     "message uses unknown function 'ovrlap'; did you mean 'overlap'?"),
])
def test_unknown_names_in_rules_suggest(tmp_path_factory, rule, want):
    errs = errors(tmp_path_factory, rule + "\n")
    assert len(errs) == 1 and want in errs[0], errs
    assert errs[0].startswith("9:"), errs  # at the rule's line


def test_unknown_part_type_in_a_test_layout(tmp_path_factory):
    errs = errors(tmp_path_factory, """test t {
    layout {
        c1 cueb at (0.4, 0.2, 0.025)
    }
    expect pass
}
""")
    assert errs == ["11:9: unknown part type 'cueb'; did you mean 'cube'? (known: cube)"]


def test_unknown_standard_library(tmp_path_factory):
    f = write_cell(tmp_path_factory, HEAD.replace("import physical", "import physcal"))
    with pytest.raises(CellspecError, match="unknown standard library 'physcal'; did you "
                       "mean 'physical'"):
        cellspec.load_cell(str(f))


def test_unknown_robot_model_suggests():
    from cellspec.robots.models import robot_spec

    with pytest.raises(CellspecError, match="unknown robot model 'pnada'; known models: panda, "
                       "kuka_iiwa, abb_irb120, abb_irb1600, ur5e; did you mean 'panda'"):
        robot_spec("pnada")


def test_unknown_structure_in_a_design_spec(tmp_path):
    spec = tmp_path / "d.cell"
    spec.write_text("design d {\n    towr(n=3) at (0.4, 0.2)\n}\n")
    r = run_cellspec("generate", STATION, spec)
    assert r.returncode == 2
    assert "unknown structure 'towr'; did you mean 'tower'?" in r.stderr, r.stderr


def test_lint_of_a_plain_cell_is_quiet_about_the_standard_library():
    r = run_cellspec("lint", STATION)
    assert r.returncode == 0, r.stdout
    assert "0 finding(s)" in r.stdout and "warning" not in r.stdout
    assert "3 finding(s) about the standard library's own rules not shown" in r.stderr
    j = json.loads(run_cellspec("lint", STATION, "--format", "json").stdout)
    assert j["reports"][0]["findings"] == [] and j["reports"][0]["stdlib_findings_hidden"] == 3
    full = run_cellspec("lint", STATION, "--include-stdlib")
    assert full.returncode == 1
    assert "rule keepout can never fire" in full.stdout
    assert "3 finding(s)" in full.stdout and "not shown" not in full.stderr


def test_lint_keeps_findings_about_the_files_own_rules():
    r = run_cellspec("lint", REPO / "rules" / "examples" / "inconsistent.cell")
    assert r.returncode == 1
    assert "rules/examples/inconsistent.cell:21:1: rule max_height" in r.stdout

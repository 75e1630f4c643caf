"""The .cell language: parsing, the typed model, the IR and semantic errors."""

from __future__ import annotations

from fractions import Fraction
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import cellspec
from cellspec.core import ir
from cellspec.core.errors import CellspecError
from cellspec.dsl.model import BoxZone, HalfSpaceZone

ROOT = Path(__file__).resolve().parent.parent
STATION = ROOT / "rules" / "cells" / "dual_arm_station.cell"

CELL = """
cell c {
    units m
    workspace x [0, 1] y [0, 1] z [0, 1]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
    keepout post box x [0.6, 0.7] y [0.4, 0.5]
    keepout corner : x + 2 * y > 1.5
}
"""


def load(tmp_path: Path, text: str, name: str = "t.cell") -> cellspec.dsl.model.Cell:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return cellspec.load_cell(str(p))


def errors(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(CellspecError) as info:
        load(tmp_path, text)
    return [str(d) for d in info.value.diagnostics]


def test_station_model() -> None:
    cell = cellspec.load_cell(str(STATION))
    assert cell.name == "dual_arm_station"
    assert cell.workspace.lo == (Fraction(1, 5), Fraction(1, 20), Fraction(0))
    assert cell.workspace.hi == (Fraction(7, 10), Fraction(1, 2), Fraction(3, 10))
    assert cell.epsilon == Fraction(1, 1000)
    assert cell.part_types["cube"].size == (Fraction(1, 20),) * 3
    assert [r.name for r in cell.robots] == ["irb120", "irb1600"]
    assert cell.robots[0].gripper.kind == "vacuum"
    assert cell.robots[1].gripper.opening == Fraction(7, 100)
    assert cell.default_gripper.kind == "parallel"
    names = [r.name for r in cell.rules]
    assert names == ["workspace", "no_overlap", "gravity", "support_order", "grip_access",
                     "keepout", "stability", "stability_stages"]  # stability on by default
    assert all(str(r.source).startswith("cellspec/rules/physical.cell:") for r in cell.rules)


def test_units_mm_scale_everything(tmp_path: Path) -> None:
    cell = load(tmp_path, """
cell c { units mm workspace x [0, 1000] y [0, 500] z [0, 300] part cube size (50, 50, 50)
         tolerance contact 1 }
rule low "{p} high" : forall p: p.top <= 250
""")
    assert cell.workspace.hi == (Fraction(1), Fraction(1, 2), Fraction(3, 10))
    assert cell.epsilon == Fraction(1, 1000)
    body = cell.rules[0].body
    assert isinstance(body, ir.Quant) and isinstance(body.body, ir.Cmp)
    assert body.body.expr.const == Fraction(-1, 4)  # p.top - 0.25 <= 0


def test_zones_and_ir(tmp_path: Path) -> None:
    cell = load(tmp_path, CELL + """
rule r "m {p} {k}" : forall p: forall k in keepout: not intersects(p, k)
rule s "m" : forall {p, q}: p.x - 2 * q.x < 0.3 implies near(p, q, 0.01)
rule t "m" : forall p in cube: count(q: contact(p, q)) >= 2 or on(p, table)
""")
    post, corner = cell.keepouts
    assert isinstance(post, BoxZone) and post.box.lo[2] < -1000  # unbounded z
    assert isinstance(corner, HalfSpaceZone) and corner.coef == (1, 2, 0) and corner.op == ">"
    r, s, t = cell.rules
    assert r.top_vars == ("p", "k") and r.part_vars == ("p",)
    assert isinstance(s.body, ir.Quant) and s.body.unordered
    cnt = [n for n in ir.walk(t.body) if isinstance(n, ir.CountCmp)]
    assert cnt and cnt[0].op == ">=" and cnt[0].n == 2


def test_syntax_error_has_file_line_col(tmp_path: Path) -> None:
    errs = errors(tmp_path, "rule r \"m\" : forall p: p.x <\n")
    assert len(errs) == 1
    assert errs[0].startswith("t.cell:1:") or ":1:" in errs[0]
    assert "syntax error" in errs[0]


def test_several_syntax_errors_are_all_reported(tmp_path: Path) -> None:
    errs = errors(tmp_path, CELL + "rule a \"m\" : forall p: p.x <\n\nrule b \"m\" : forall : 1\n"
                  "\ntest t { expect }\n")
    assert len(errs) >= 3
    where = [tuple(int(x) for x in e.split(":")[1:3]) for e in errs]
    assert where == sorted(where) and len(set(where)) == len(where)


def test_semantic_errors_are_collected(tmp_path: Path) -> None:
    errs = errors(tmp_path, CELL + """
rule a "m" : forall p: touches(p, p)
rule b "m" : forall p: q.x > 0
rule c "m {z}" : forall p: p.colour == red
rule a "dup" : forall p: p.x > 0
test t1 { layout { c1 sphere at (0.1, 0.1, 0.1) } expect fail nosuch(c1) }
""")
    text = "\n".join(errs)
    assert "unknown relation 'touches'" in text
    assert "unknown variable 'q'" in text
    assert "unknown attribute 'colour'" in text
    assert "unknown part type 'sphere'" in text
    assert "unknown rule 'nosuch'" in text
    assert len(errs) >= 5
    assert all(":" in e.split(" ")[0] for e in errs)


def test_duplicate_rule_across_imports_names_both(tmp_path: Path) -> None:
    errs = errors(tmp_path, "import physical\n" + CELL + 'rule gravity "m" : forall p: true\n')
    assert any("already defined at cellspec/rules/physical.cell" in e for e in errs)


def test_import_errors(tmp_path: Path) -> None:
    assert any("imported file not found" in e for e in errors(tmp_path, 'import "nope.cell"\n'
                                                                        + CELL))
    assert any("unknown standard library" in e for e in errors(tmp_path, "import chemistry\n"
                                                               + CELL))
    (tmp_path / "a.cell").write_text('import "b.cell"\n')
    (tmp_path / "b.cell").write_text('import "a.cell"\n')
    with pytest.raises(CellspecError) as info:
        cellspec.load_cell(str(tmp_path / "a.cell"))
    assert "import cycle" in str(info.value)


def test_two_cells_rejected(tmp_path: Path) -> None:
    (tmp_path / "other.cell").write_text(CELL.replace("cell c", "cell d"))
    errs = errors(tmp_path, 'import "other.cell"\n' + CELL)
    assert any("a second cell" in e for e in errs)


def test_message_placeholders_checked(tmp_path: Path) -> None:
    errs = errors(tmp_path, CELL + 'rule r "{q} and {gap(q)} {p.nothing}" : forall p: true\n')
    text = "\n".join(errs)
    assert "'{q}'" in text and "'q'" in text and "unknown attribute 'nothing'" in text


def test_count_needs_whole_number(tmp_path: Path) -> None:
    errs = errors(tmp_path, CELL + 'rule r "m" : forall p: count(q: contact(p, q)) > 1.5\n')
    assert any("whole number" in e for e in errs)


def test_nonlinear_rejected(tmp_path: Path) -> None:
    errs = errors(tmp_path, CELL + 'rule r "m" : forall p, q: p.x * q.x > 0\n')
    assert any("constant factor" in e for e in errs)


def test_textx_language_is_registered() -> None:
    eps = [e for e in entry_points(group="textx_languages") if e.name == "cellspec"]
    assert eps, "cellspec is not registered under textx_languages"
    lang = eps[0].load()
    assert lang.pattern == "*.cell"
    mm = lang.metamodel() if callable(lang.metamodel) else lang.metamodel
    assert mm.model_from_str(CELL) is not None


def test_empty_and_binary_files(tmp_path: Path) -> None:
    assert any("empty rule file" in e for e in errors(tmp_path, "   \n"))
    p = tmp_path / "bin.cell"
    p.write_bytes(b"\x00\xff\xfe garbage")
    with pytest.raises(CellspecError, match="not UTF-8"):
        cellspec.load_cell(str(p))


def test_keepout_with_omitted_axis_is_unbounded_and_exact(tmp_path: Path) -> None:
    # regression: an omitted axis was bounded at 1e6 m, overflowing clingo's 32-bit ints
    from cellspec.layout import layout_from_obj

    cell = load(tmp_path, """import physical
cell c { workspace x [0, 1] y [0, 1] z [0, 1] surface table z 0
         part cube size (0.05, 0.05, 0.05)
         keepout blocked box x [0.40, 0.50] y [0.225, 0.325] }
""")
    lay = layout_from_obj({"parts": [{"id": "a", "type": "cube", "pos": [0.40, 0.275, 0.025]}]})
    for backend in ("clingo", "reference"):
        v = cellspec.check(cell, lay, backend=backend)
        assert [(x.rule, x.parts) for x in v.violations] == [("keepout", ("a",))], backend


def test_absurd_cell_coordinates_rejected(tmp_path: Path) -> None:
    errs = errors(tmp_path, "cell c { workspace x [0, 1e9] y [0, 1] z [0, 1] }\n")
    assert any("absurd" in e for e in errs)


# --- language version 2: const and predicate errors, each at its exact file:line:col ----

V2_CELL = """cell c {
    workspace x [0, 1] y [0, 1] z [0, 1]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
    keepout post box x [0.6, 0.7] y [0.4, 0.5]
    robot arm model panda base (0, 0, 0) reach 0.5 gripper vacuum
}
"""  # 7 lines: what follows starts at line 8


@pytest.mark.parametrize(("tail", "expected"), [
    ("const W = 1\nconst W = 2", "t.cell:9:1: error: const 'W' is already defined (as a "
     "const) at t.cell:8:1"),
    ("const W = 1\npredicate W(p) : grounded(p)", "t.cell:9:1: error: predicate 'W' is "
     "already defined (as a const) at t.cell:8:1"),
    ('rule r "m" : forall p: p.x <= W\nconst W = 1', "t.cell:8:31: error: const 'W' is used "
     "before its definition at t.cell:9:1"),
    ('rule r "m" : forall p: p.x <= Q', "t.cell:8:31: error: 'Q' is not a number, a const or "
     "an attribute (consts: none defined)"),
    ("const rule = 1", "t.cell:8:1: error: const 'rule' is a keyword of the language; pick "
     "another name"),
    ("const robot = 1", "t.cell:8:1: error: const 'robot' is a keyword of the language; pick "
     "another name"),
    ("predicate contact(p) : grounded(p)", "t.cell:8:1: error: predicate 'contact' shadows "
     "the built-in relation contact(); pick another name"),
    ("const post = 1", "t.cell:8:1: error: const 'post' shadows a name of the cell (a zone, "
     "surface, robot or part type); pick another name"),
    ('const W = 1\nrule r "m" : forall W: grounded(W)', "t.cell:9:21: error: variable 'W' "
     "shadows the const W; pick another name"),
    ("predicate a(p) : a(p)", "t.cell:8:1: error: predicate 'a' is recursive (a -> a): "
     "predicates are expanded at their use, so none may call itself, directly or through "
     "another"),
    ('predicate a(p) : b(p)\npredicate b(p) : a(p)\nrule r "m" : forall p: a(p)',
     "t.cell:8:1: error: predicate 'a' is recursive (a -> b -> a): predicates are expanded "
     "at their use, so none may call itself, directly or through another"),
    ('predicate a(p) : grounded(p)\nrule r "m" : forall p: a(p, p)', "t.cell:9:24: error: "
     "predicate 'a' (defined at t.cell:8:1) takes 1 argument(s), got 2"),
    ('predicate a(p) : p.zz > 0\nrule r "m" : forall p: a(p)', "t.cell:8:18: error: in "
     "predicate 'a' defined at t.cell:8:1, used at t.cell:9:24: unknown attribute 'zz'"),
    ('predicate a(p) : p.x > 0\nrule r "m" : forall r in robot: a(r)', "t.cell:8:18: error: "
     "in predicate 'a' defined at t.cell:8:1, used at t.cell:9:33: 'p' is a robot; "
     "attributes belong to parts"),
    ('rule r "m" : forall p: reachable(p, hand)', "t.cell:8:37: error: argument of reachable "
     "must be a robot (robots: arm) or a robot variable (forall r in robot)"),
    ('rule r "m" : forall {r, s} in robot: true', "t.cell:8:21: error: unordered pairs range "
     "over parts only"),
])
def test_version2_errors_name_file_line_col(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            tail: str, expected: str) -> None:
    monkeypatch.chdir(tmp_path)
    errs = errors(tmp_path, V2_CELL + tail + "\n")
    assert any(e.startswith(expected) for e in errs), errs


def test_const_in_the_cell_before_its_definition_and_unknown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    text = V2_CELL.replace("size (0.05, 0.05, 0.05)", "size (W, W, W)")
    errs = errors(tmp_path, text + "const W = 0.05\n")
    assert errs[0] == "t.cell:4:20: error: const 'W' is used before its definition at t.cell:8:1"
    assert sum("before its definition" in e for e in errs) == 1  # once per (x, y, z)
    errs = errors(tmp_path, text)
    assert errs[0] == ("t.cell:4:20: error: 'W' is not a number or a known const (consts: "
                       "none defined)")


def test_const_defined_in_a_file_not_imported(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.cell").write_text("const W = 0.05\n")
    (tmp_path / "b.cell").write_text('rule r "m" : forall p: p.x <= W\n')
    errs = errors(tmp_path, 'import "a.cell"\nimport "b.cell"\n' + V2_CELL)
    assert any(e.startswith("b.cell:1:31: error: const 'W' is defined at a.cell:1:1, in a file "
                            "this one does not import") for e in errs), errs


def test_consts_and_predicates_are_visible_through_imports(tmp_path: Path) -> None:
    (tmp_path / "lib.cell").write_text(
        "const W = 0.05\npredicate resting(p) : grounded(p) or exists q: supports(q, p)\n")
    (tmp_path / "mid.cell").write_text('import "lib.cell"\n')
    cell = load(tmp_path, 'import "mid.cell"\n' + V2_CELL.replace("(0.05, 0.05, 0.05)",
                                                                  "(W, W, W)")
                + 'rule r "m" : forall p: resting(p)\n')
    assert cell.part_types["cube"].size == (Fraction(1, 20),) * 3
    body = cell.rule("r").body.body
    assert isinstance(body, ir.Or) and body.ops[0] == ir.Rel("grounded", (ir.VarArg("p"),))


def test_consts_everywhere_a_number_is(tmp_path: Path) -> None:
    cell = load(tmp_path, """const LO = 0.1
const HI = 0.9
const K = 2
const T = 0.002
cell c {
    workspace x [LO, HI] y [0, 1] z [0, 1]
    surface table z LO
    part cube size (0.05, 0.05, 0.05) mass K
    robot arm model panda base (LO, LO, 0) yaw K reach HI gripper parallel opening HI depth T
    keepout k : 2 * x + y > HI
    tolerance contact T
}
rule r "m" : forall p: K * p.x <= HI and count(q: near(p, q, T)) <= K
test t {
    layout {
        c1 cube at (0.5, 0.5, 0.125) size (0.05, 0.05, 0.05)
    }
    robust T
    expect pass
}
""")
    assert cell.workspace.lo[0] == Fraction(1, 10) and cell.workspace.hi[0] == Fraction(9, 10)
    assert cell.part_types["cube"].mass == 2 and cell.epsilon == Fraction(2, 1000)
    assert cell.robots[0].reach == Fraction(9, 10) and cell.robots[0].yaw_deg == 2
    assert cell.keepouts[0].coef[0] == 2 and cell.keepouts[0].rhs == Fraction(9, 10)
    rule = cell.rule("r").body.body
    assert rule.ops[0].expr.terms[0][1] == 2 and rule.ops[1].n == 2
    assert cell.tests[0].robust == Fraction(2, 1000)


def test_design_refuses_consts_clearly(tmp_path: Path) -> None:
    from cellspec.dsl.design import load_designs

    p = tmp_path / "d.cell"
    p.write_text(CELL + "const W = 0.1\ndesign d {\n    packing(n=2, region x [0.2, W] "
                 "y [0.2, 0.4])\n}\n")
    with pytest.raises(CellspecError) as info:
        load_designs(str(p))
    assert "a design takes numbers, not consts" in str(info.value)

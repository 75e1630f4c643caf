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

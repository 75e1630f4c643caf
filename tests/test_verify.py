"""verify: verdict contents, invariants, notes, and the rounding report."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

import cellspec
from cellspec.layout import layout_from_obj
from cellspec.solver.result import Verdict, Violation

ROOT = Path(__file__).resolve().parent.parent
STATION = str(ROOT / "rules" / "cells" / "dual_arm_station.cell")


@pytest.fixture(scope="module")
def station():
    return cellspec.load_cell(STATION)


def cube(pid: str, x: float, y: float, z: float, **kw) -> dict:
    return {"id": pid, "type": "cube", "pos": [x, y, z], **kw}


def test_messages_carry_the_numbers(station) -> None:
    lay = layout_from_obj({"parts": [cube("c3", 0.40, 0.20, 0.025), cube("c4", 0.44, 0.20, 0.025),
                                     cube("c5", 0.60, 0.30, 0.100)]})
    v = cellspec.check(station, lay)
    by = {(x.rule, x.parts): x for x in v.violations}
    assert by[("no_overlap", ("c3", "c4"))].message == "c3 overlaps c4 by 0.010 m on x"
    g = by[("gravity", ("c5",))]
    assert g.message == ("c5 rests on nothing: its bottom is 0.075 m above the nearest support "
                         "(the table)")
    assert g.source.startswith("cellspec/rules/physical.cell:")
    assert v.verdict == "fail" and set(by) == {("no_overlap", ("c3", "c4")), ("gravity", ("c5",))}


def test_gravity_message_for_a_sunk_part(station) -> None:
    lay = layout_from_obj({"parts": [cube("a", 0.4, 0.2, 0.025), cube("b", 0.4, 0.2, 0.065)]})
    msgs = {(x.rule, x.parts): x.message for x in cellspec.check(station, lay).violations}
    assert msgs[("gravity", ("b",))] == ("b rests on nothing: its bottom is 0.010 m below the "
                                         "top of a, which it sinks into")


def test_gravity_messages_on_a_large_layout_use_columns(station) -> None:
    parts = [cube(f"t{i}_{k}", 0.25 + 0.06 * (i % 8), 0.1 + 0.06 * (i // 8), 0.025 + 0.05 * k)
             for i in range(40) for k in range(2)]
    parts[1]["pos"][2] += 0.004  # t0_1 floats 4 mm above t0_0
    lay = layout_from_obj({"parts": parts})
    v = cellspec.check(station, lay)
    assert [(x.rule, x.parts, x.message) for x in v.violations] == [
        ("gravity", ("t0_1",), "t0_1 rests on nothing: its bottom is 0.004 m above the nearest "
                               "support (t0_0)")]


def test_no_order_skips_order_rules_and_says_so(station) -> None:
    lay = layout_from_obj({"parts": [cube("a", 0.4, 0.2, 0.075), cube("b", 0.4, 0.2, 0.025)]})
    v = cellspec.check(station, lay)
    assert v.verdict == "pass"
    assert set(v.skipped_rules) == {"support_order", "grip_access", "stability_stages"}
    assert any("no order" in n for n in v.notes)
    lay2 = layout_from_obj({"parts": [cube("a", 0.4, 0.2, 0.075), cube("b", 0.4, 0.2, 0.025)],
                            "order": ["a", "b"]})
    v2 = cellspec.check(station, lay2)
    assert [(x.rule, x.parts) for x in v2.violations] == [("support_order", ("b", "a"))]


def test_warnings_never_fail(tmp_path: Path) -> None:
    (tmp_path / "w.cell").write_text(f'import "{STATION}"\n'
                                     'rule tall "{p} is tall: top {p.top}" severity warning :\n'
                                     '    forall p: p.top <= 0.06\n')
    cell = cellspec.load_cell(str(tmp_path / "w.cell"))
    lay = layout_from_obj({"parts": [cube("a", 0.4, 0.2, 0.025), cube("b", 0.4, 0.2, 0.075)],
                           "order": ["a", "b"]})
    v = cellspec.check(cell, lay)
    assert v.verdict == "pass" and not v.violations
    assert [(w.rule, w.parts, w.message) for w in v.warnings] == [
        ("tall", ("b",), "b is tall: top 0.100 m")]
    assert v.to_json()["warnings"][0]["rule"] == "tall"


def test_rounding_that_decides_a_relation_is_reported(station) -> None:
    # a 1.04 mm gap: exactly, no contact (eps = 1 mm); on the 0.1 mm grid the gap is 1.0 mm
    lay = layout_from_obj({"parts": [cube("a", 0.40, 0.20, 0.025),
                                     cube("b", 0.45104, 0.20, 0.025)]})
    v = cellspec.check(station, lay)
    assert any("rounding" in n and "contact(a, b)" in n for n in v.notes)
    on_grid = layout_from_obj({"parts": [cube("a", 0.40, 0.20, 0.025),
                                         cube("b", 0.4511, 0.20, 0.025)]})
    assert not any("rounding" in n for n in cellspec.check(station, on_grid).notes)


def test_verdict_invariants_run() -> None:
    bad = Violation(rule="r", parts=("a",), message="m", source="f:1:1")
    with pytest.raises(ValidationError):
        Verdict(verdict="pass", violations=(bad,))
    with pytest.raises(ValidationError):
        Verdict(verdict="fail")
    with pytest.raises(ValidationError):
        Verdict(verdict="unknown")
    v = Verdict(verdict="fail", violations=(bad,))
    with pytest.raises(ValidationError):
        v.verdict = "pass"  # frozen


def test_same_input_same_json(station) -> None:
    lay = cellspec.load_layout(str(ROOT / "rules" / "examples" / "tower3_broken.json"))
    a = cellspec.check(station, lay).to_json(timing=False)
    b = cellspec.check(station, lay).to_json(timing=False)
    assert a == b and a["verdict"] == "fail"


def test_mm_layout_same_verdict(station) -> None:
    m = layout_from_obj({"parts": [cube("a", 0.4, 0.2, 0.025), cube("b", 0.41, 0.2, 0.06)]})
    mm = layout_from_obj({"units": "mm", "parts": [cube("a", 400, 200, 25),
                                                   cube("b", 410, 200, 60)]})
    va, vb = cellspec.check(station, m), cellspec.check(station, mm)
    assert va.to_json(timing=False) == vb.to_json(timing=False)


def test_too_fine_constants_are_refused_not_overflowed(tmp_path: Path) -> None:
    from cellspec.core.errors import CellspecError

    (tmp_path / "f.cell").write_text(
        "cell c { workspace x [0, 1] y [0, 1] z [0, 1] part cube size (0.05, 0.05, 0.05) }\n"
        'rule r "m" : forall p: 0.33333333 * p.x < 0.2\n')
    cell = cellspec.load_cell(str(tmp_path / "f.cell"))
    lay = layout_from_obj({"parts": [cube("a", 0.4, 0.2, 0.025)]})
    with pytest.raises(CellspecError) as info:
        cellspec.check(cell, lay)
    d = info.value.diagnostics[0]
    assert (d.line, d.col) == (2, 1) and "32-bit" in d.message
    assert cellspec.check(cell, lay, backend="reference").verdict == "pass"


def test_reference_backend_refuses_large_layouts(station) -> None:
    from cellspec.core.errors import CellspecError

    parts = [cube(f"c{i}", 0.25 + 0.001 * (i % 400), 0.1, 0.025) for i in range(2001)]
    with pytest.raises(CellspecError, match="small layouts"):
        cellspec.check(station, layout_from_obj({"parts": parts}), backend="reference")


def test_grip_message_names_the_blockers(station) -> None:
    # centre cube placed last between four earlier cubes, 5 mm away on x and y
    c = (0.45, 0.25, 0.025)
    parts = [cube("w", c[0] - 0.055, c[1], c[2]), cube("e", c[0] + 0.055, c[1], c[2]),
             cube("s", c[0], c[1] - 0.055, c[2]), cube("n", c[0], c[1] + 0.055, c[2]),
             cube("mid", *c)]
    lay = layout_from_obj({"parts": parts, "order": ["w", "e", "s", "n", "mid"]})
    v = cellspec.check(station, lay)
    assert [(x.rule, x.parts, x.message) for x in v.violations] == [
        ("grip_access", ("mid",), "mid cannot be gripped when it is placed: blocked along x "
                                  "by w, e and along y by s, n")]
    # one earlier part on a side blocks that axis; placed before s and n, y is free
    assert cellspec.check(station, layout_from_obj(
        {"parts": parts, "order": ["w", "e", "s", "mid", "n"]})).verdict == "fail"
    assert cellspec.check(station, layout_from_obj(
        {"parts": parts, "order": ["w", "e", "mid", "s", "n"]})).verdict == "pass"


def test_hostile_density_gives_unknown_not_pass(station) -> None:
    lay = layout_from_obj({"parts": [cube(f"c{i}", 0.4, 0.2, 0.025) for i in range(5000)]})
    v = cellspec.check(station, lay)
    assert v.verdict == "unknown" and "denser than a buildable cell" in v.reason


def test_many_violations_are_counted_beyond_the_listing_cap(station, monkeypatch) -> None:
    import cellspec.solver.verify as verify

    monkeypatch.setattr(verify, "MAX_LISTED", 3)
    lay = layout_from_obj({"parts": [cube(f"c{i}", 0.4, 0.2, 0.025) for i in range(4)]})
    v = cellspec.check(station, lay)
    assert v.verdict == "fail" and len(v.violations) == 3
    assert "no_overlap: 6 violations, the first 3 are listed" in v.notes

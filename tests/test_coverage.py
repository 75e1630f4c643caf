"""`cellspec test --coverage`: rules held / fired, disjuncts of the negated body that fired."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cellspec.dsl.parser import load_cell
from cellspec.solver.asp.compile import compile_rules
from cellspec.solver.instance import build_instance
from cellspec.solver.verify import raw_violations
from cellspec.testing.coverage import disjunct_hits, run_coverage, split_disjuncts
from cellspec.testing.runner import layout_of_test

REPO = Path(__file__).resolve().parent.parent
PHYSICAL_TESTS = REPO / "rules" / "stdlib" / "physical_tests.cell"

CELL = """cell c {
    units m
    workspace x [0.0, 1.0] y [0.0, 1.0] z [0.0, 1.0]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
}

// two disjuncts when negated: too high, or too far left
rule placed "{p} is misplaced" :
    forall p: p.top <= 0.25 and p.x >= 0.3

rule spare "{p} is far out" :
    forall p: p.y <= 0.9

test fine {
    layout { c1 cube at (0.5, 0.5, 0.025) }
    expect pass
}

test too_high {
    layout { c1 cube at (0.5, 0.5, 0.5) }
    expect fail placed(c1)
    only
}
"""


@pytest.fixture()
def cell_file(tmp_path: Path) -> Path:
    f = tmp_path / "cov.cell"
    f.write_text(CELL)
    return f


def test_one_rule_id_per_disjunct_of_the_standard_rules():
    cell = load_cell(PHYSICAL_TESTS)
    prog = compile_rules(cell.rules, 20, 1400, "parallel")
    split, mapping = split_disjuncts(prog)
    counts: dict[str, int] = {}
    for k, _ in mapping:
        counts[cell.rules[k].name] = counts.get(cell.rules[k].name, 0) + 1
    assert counts == {"workspace": 1, "no_overlap": 1, "gravity": 1, "support_order": 2,
                      "grip_access": 2, "keepout": 1, "stability": 1, "stability_stages": 1}
    assert [r.index for r in split.rules] == list(range(len(mapping)))
    assert mapping[3][1].body == "supports(p,q), p > q, p != q"


def test_split_program_finds_exactly_what_check_finds():
    """Differential: the split program's hits, mapped back, are check's violations."""
    cell = load_cell(PHYSICAL_TESTS)
    compared = 0
    for test in cell.tests:
        layout = layout_of_test(test)
        rules, hits, reason = disjunct_hits(cell, layout)
        assert reason is None
        status, found, _ = raw_violations(cell, build_instance(cell, layout), rules)
        assert status == "done"
        fired = {k for k, _ in found}
        assert {k for k, ns in hits.items() if ns} == fired, test.name
        compared += 1
    assert compared >= 40


def test_report_held_fired_and_disjuncts(cell_file: Path):
    report, errors = run_coverage([str(cell_file)])
    assert errors == []
    placed = next(r for r in report.rules.values() if r.name == "placed")
    spare = next(r for r in report.rules.values() if r.name == "spare")
    assert [d.number for d in placed.disjuncts] == [1, 2]
    assert placed.held == [f"{cell_file.name}::fine"] or placed.held[0].endswith("::fine")
    assert [t.rsplit("::", 1)[1] for t in placed.fired] == ["too_high"]
    assert placed.disjunct_hits == {1: 1}  # too high fired, too far left never did
    assert placed.covered == 3 and placed.items == 4
    assert [t.rsplit("::", 1)[1] for t in spare.held] == ["fine", "too_high"]
    assert spare.fired == [] and spare.covered == 1 and spare.items == 3
    assert report.covered == 4 and report.items == 7


def _main(capsys, *args: str) -> tuple[int, str, str]:
    from cellspec.cli import main

    try:
        code = main(list(args))
    except SystemExit as exc:  # usage errors
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_table_json_and_fail_under(cli, capsys, cell_file: Path):
    r = cli("test", cell_file, "--coverage")
    assert r.returncode == 0, r.stderr
    assert "2 passed, 0 failed" in r.stdout
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith("placed"))
    assert row.split()[-4:] == ["1", "1", "1/2", "75%"]
    assert "placed: disjunct 2/2 never fired: p.x" not in r.stdout  # bodies are ASP, not DSL
    assert "placed: disjunct 2/2 never fired:" in r.stdout
    assert "spare: no passing test expects it to fire" in r.stdout
    assert r.stdout.rstrip().endswith("coverage: 4/7 items, 57.1% (2 rules)")
    code, out, _ = _main(capsys, "test", str(cell_file), "--coverage", "--format", "json")
    data = json.loads(out)
    assert data["coverage"]["percent"] == 57.1
    assert [(x["rule"], x["covered"], x["items"]) for x in data["coverage"]["rules"]] == [
        ("placed", 3, 4), ("spare", 1, 3)]
    code, _, err = _main(capsys, "test", str(cell_file), "--fail-under", "60")
    assert code == 1
    assert "rule coverage 57.1% is under --fail-under 60" in err
    assert _main(capsys, "test", str(cell_file), "--fail-under", "57")[0] == 0
    code, _, err = _main(capsys, "test", str(cell_file), "--fail-under", "101")
    assert code == 2 and "--fail-under must be a percentage" in err

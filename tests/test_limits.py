"""Issue 16, wrong answers: every limit and rounding decides on the safe side.

Each test reproduces one defect found from outside: count constants that wrapped in
clingo, a robust tolerance claimed beyond the proof, grid rounding that passed,
infinite or NaN limits, test runs that selected nothing, skipped plan checks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO

import cellspec
from cellspec.layout import layout_from_obj
from cellspec.solver.verify import check

CELL_HEAD = """import physical
cell t {
    units m
    workspace x [0, 1] y [0, 1] z [0, 1]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    tolerance contact 0.001
}
"""
BARE_HEAD = CELL_HEAD.replace("import physical\n", "")


def _parts(*pos: tuple[float, float, float]) -> dict:
    return {"units": "m", "parts": [{"id": chr(ord("a") + k), "type": "cube", "pos": list(p)}
                                    for k, p in enumerate(pos)]}


TOUCHING = _parts((0.5, 0.5, 0.025), (0.55, 0.5, 0.025))


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# --- 1. count constants: refused outside clingo's exact 32-bit range -----------------------
@pytest.mark.parametrize("const", ["4294967297", "2147483648", "4294967296", "-2147483648"])
def test_count_constant_out_of_range_is_refused(cli, tmp_path, const):
    cell = _write(tmp_path, "c.cell", BARE_HEAD + "\nrule r \"m\" : forall p: "
                  f"count(q: contact(p, q)) >= {const}\n")
    lay = _write(tmp_path, "l.json", json.dumps(TOUCHING))
    r = cli("check", cell, lay)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"c.cell:9:24: error: count(...) is compared with {const}, which is too large" \
        in r.stderr


@pytest.mark.parametrize("op", [">=", "<=", ">", "<", "==", "!="])
@pytest.mark.parametrize("const", [2**31 - 1, 2**31 - 2, -(2**31 - 1), 1, 2])
def test_count_constants_near_the_range_agree(tmp_path, op, const):
    """Differential: clingo and the reference evaluator agree at the edge of the range."""
    cell = cellspec.load_cell(str(_write(tmp_path, "c.cell", BARE_HEAD + "\nrule r \"m\" : "
                                         f"forall p: count(q: contact(p, q)) {op} {const}\n")))
    lay = layout_from_obj(TOUCHING)
    a, b = check(cell, lay), check(cell, lay, backend="reference")
    assert a.verdict == b.verdict != "unknown"
    assert [(v.rule, v.parts) for v in a.violations] == [(v.rule, v.parts) for v in b.violations]
    # each part touches exactly one other: the truth is known
    expect = {">=": 1 >= const, "<=": 1 <= const, ">": 1 > const, "<": 1 < const,
              "==": 1 == const, "!=": 1 != const}[op]
    assert a.verdict == ("pass" if expect else "fail")


# --- 2. check --robust states the tolerance actually decided -------------------------------
def test_robust_between_grid_steps_rounds_up(cli, tmp_path):
    cell = _write(tmp_path, "c.cell", CELL_HEAD)
    lay = _write(tmp_path, "l.json", json.dumps(TOUCHING))
    r = cli("check", cell, lay, "--robust", "0.00055")
    # 0.55 mm each way makes the touching cubes overlap by 1.1 mm > eps: not robust
    assert r.returncode == 1, r.stdout + r.stderr
    assert "not robust to 0.0006 m: no_overlap breaks" in r.stdout
    assert "robust to 0.00055" not in r.stdout
    assert "rounded up to 0.0006 m" in r.stderr
    j = json.loads(cli("check", cell, lay, "--robust", "0.00055", "--format", "json").stdout)
    assert j["robust"]["tolerance"] == 0.0006 and j["robust"]["requested"] == 0.00055
    assert j["robust"]["status"] == "refuted"


def test_robust_on_grid_step_is_exact(cli, tmp_path):
    cell = _write(tmp_path, "c.cell", CELL_HEAD)
    lay = _write(tmp_path, "l.json", json.dumps(TOUCHING))
    r = cli("check", cell, lay, "--robust", "0.0005", "--format", "json")
    j = json.loads(r.stdout)
    assert r.returncode == 0 and j["robust"]["status"] == "proved"
    assert j["robust"]["tolerance"] == 0.0005 and "requested" not in j["robust"]


# --- 3. grid rounding that decides a relation never gives pass -----------------------------
@pytest.mark.parametrize(("pos", "relation"), [
    (((0.5, 0.5, 0.025), (0.54896, 0.5, 0.025)), "overlaps"),   # 1.04 mm overlap, eps 1 mm
    (((0.5, 0.5, 0.025), (0.5, 0.5, 0.07605)), "supports"),     # floats 1.05 mm
    (((0.97605, 0.5, 0.025),), "workspace"),                    # 1.05 mm outside
])
def test_rounding_that_decides_is_unknown(cli, tmp_path, pos, relation):
    cell = _write(tmp_path, "c.cell", CELL_HEAD)
    lay = _write(tmp_path, "l.json", json.dumps(_parts(*pos)))
    r = cli("check", cell, lay, "--format", "json")
    j = json.loads(r.stdout)
    assert r.returncode == 2 and j["verdict"] == "unknown"
    assert j["reason"].startswith("rounding:") and relation in j["reason"]


def test_rounding_a_relation_no_rule_reads_still_passes(tmp_path):
    """Only relations the rules read matter: a workspace-only cell ignores a rounded overlap."""
    cell = cellspec.load_cell(str(_write(tmp_path, "c.cell", BARE_HEAD + "\nrule w \"{p}\" : "
                                         "forall p: inside(p, workspace)\n")))
    v = check(cell, layout_from_obj(_parts((0.5, 0.5, 0.025), (0.54896, 0.5, 0.025))))
    assert v.verdict == "pass" and any("decides overlaps(a, b)" in n for n in v.notes)


def test_rounding_with_a_real_violation_still_fails(tmp_path):
    cell = cellspec.load_cell(str(_write(tmp_path, "c.cell", CELL_HEAD)))
    v = check(cell, layout_from_obj(_parts((0.5, 0.5, 0.025), (0.54896, 0.5, 0.025),
                                           (0.2, 0.2, 0.5))))
    assert v.verdict == "fail" and [x.rule for x in v.violations] == ["gravity"]


# --- 4. one validator for every limit flag --------------------------------------------------
LIMIT_FLAGS = [
    ("check", "--timeout"), ("check", "--time-limit"), ("check", "--robust-timeout"),
    ("test", "--timeout"), ("test", "--time-limit"), ("explain", "--timeout"),
    ("lint", "--timeout"), ("plan", "--time-limit"), ("repair", "--time-limit"),
    ("generate", "--time-limit"), ("sim", "--time-limit"), ("sim", "--motion-time-limit"),
    ("review", "--timeout"), ("review", "--repair-time-limit"), ("design", "--timeout"),
    ("design", "--time-limit"),
]


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-5", "1e9", "none"])
@pytest.mark.parametrize(("verb", "flag"), LIMIT_FLAGS)
def test_every_limit_flag_is_validated(verb, flag, value, capsys):
    from cellspec.cli import build_parser

    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([verb, "a", "b", f"{flag}={value}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "positive number of seconds, at most 86400" in err or "expected a number" in err


def test_limit_flag_accepts_a_number():
    from cellspec.cli import build_parser

    a = build_parser().parse_args(["check", "c", "l", "--timeout", "1.5"])
    assert a.time_limit == 1.5
    a = build_parser().parse_args(["test", "x", "--time-limit", "2"])
    assert a.time_limit == 2.0


def test_python_api_check_seconds_refuses_infinity():
    from cellspec.commands.common import check_seconds

    for v in (float("inf"), float("nan"), 0.0, -1.0):
        with pytest.raises(cellspec.CellspecError):
            check_seconds(v)


# --- 5. a test run that selects nothing is an error -----------------------------------------
def test_no_tests_selected(cli, tmp_path):
    r = cli("test", REPO / "rules" / "cells", "-k", "[")
    assert r.returncode == 2 and "no tests selected" in r.stderr
    (tmp_path / "empty").mkdir()
    r = cli("test", tmp_path / "empty")
    assert r.returncode == 2 and "no tests selected" in r.stderr


# --- 6. check-plan: a check that did not apply is skipped, not passed -----------------------
@pytest.mark.parametrize("path", ["", " PATH []"])
def test_check_plan_without_path_skips(cli, tmp_path, path):
    text = (REPO / "rules" / "plans" / "sort_cubes_ok.txt").read_text()
    head, _, _ = text.partition(" PATH [")
    rest = text.split("]\n", 1)[1] if "]\n" in text else ""
    plan = _write(tmp_path, "p.txt", head + path + "\n" + rest)
    r = cli("check-plan", REPO / "rules" / "cells" / "sort_cubes.cell", plan, "--format", "json")
    j = json.loads(r.stdout)
    assert r.returncode == 0, r.stderr
    assert j["skipped"] == ["waypoints", "spacing"]
    assert "waypoints" not in j["passed"] and "spacing" not in j["passed"]

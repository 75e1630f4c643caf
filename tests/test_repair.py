"""Minimal-change repair with CP-SAT: Tables V and VI of seed 000, a property test on
random invalid layouts, proved impossibility, and the CLI. Every repaired layout is
re-verified here by clingo and by the numpy reference."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from conftest import STATION

import cellspec
from cellspec.core.errors import CellspecError
from cellspec.dsl.parser import load_cell
from cellspec.layout import Layout, layout_from_obj
from cellspec.solver.cpsat.repair import parse_blocked, repair
from cellspec.solver.cpsat.scenarios import (
    SCENARIOS,
    TABLE_V,
    find_test,
    table_vi_files,
)
from cellspec.testing.runner import layout_of_test


@pytest.fixture(scope="module")
def station():
    return cellspec.load_cell(str(STATION))


def _reverified(cell, original: Layout, r) -> Layout:
    assert r.status in ("optimal", "feasible"), r.reason
    fixed = layout_from_obj(r.layout)
    assert cellspec.check(cell, fixed).verdict == "pass"
    assert cellspec.check(cell, fixed, backend="reference").verdict == "pass"
    assert sorted(fixed.types) == sorted(original.types) and len(fixed) == len(original)
    moved = {m.part for m in r.moves}
    for i, pid in enumerate(original.ids):  # unmoved parts stay exactly where they were
        if pid not in moved:
            assert np.allclose(fixed.pos[i], original.pos[i])
    return fixed


@pytest.mark.parametrize("title,kind,test", TABLE_V, ids=[t[2] for t in TABLE_V])
def test_table_v(title, kind, test):
    cell = load_cell(SCENARIOS / "table_v.cell")
    lay = layout_of_test(find_test(cell, test))
    before = cellspec.check(cell, lay)
    assert before.verdict == "fail"
    r = repair(cell, lay)
    _reverified(cell, lay, r)
    # stability is repaired by rounds and never claimed minimal (README): a case that is
    # unstable before, or whose first repair needed a stability round, is `feasible`
    unstable = any(v.rule.startswith("stability") for v in before.violations)
    assert r.status == "feasible" if unstable else r.status in ("optimal", "feasible")
    if kind == "Seq":
        assert r.parts_moved == 0 and r.reordered
    else:
        assert 1 <= r.parts_moved <= 3


def test_table_v_minimal_examples():
    cell = load_cell(SCENARIOS / "table_v.cell")
    lay = layout_of_test(find_test(cell, "tower_3_cube_moved_to_x_1"))
    r = repair(cell, lay)
    (m,) = r.moves
    assert m.part == "c3" and m.dst == (0.675, 0.2, 0.025)  # nearest: the workspace edge
    lay = layout_of_test(find_test(cell, "dense_block_12_overlap"))
    (m,) = repair(cell, lay).moves
    assert m.part == "b8" and m.dst == (0.40, 0.2, 0.075)  # pushed back where it was


@pytest.mark.parametrize("path", table_vi_files(), ids=lambda p: p.stem)
def test_table_vi(path):
    cell = load_cell(path)
    lay = layout_of_test(cell.tests[0])
    r = repair(cell, lay, keep_shape=True)
    _reverified(cell, lay, r)


def test_table_vi_has_ten_scenarios():
    assert len(table_vi_files()) == 10


def test_rigid_shift_keeps_shape():
    cell = load_cell(SCENARIOS / "table_vi_09_diagonal_obstacle.cell")
    lay = layout_of_test(cell.tests[0])
    r = repair(cell, lay, keep_shape=True)
    assert r.status == "optimal" and all(m.how == "shift" for m in r.moves)
    d = {tuple(np.round(np.subtract(m.dst, m.src), 4)) for m in r.moves}
    assert len(d) == 1  # one displacement vector for the whole canopy


def test_property_random_invalid_layouts(station):
    rng = np.random.default_rng(11)
    outcomes = set()
    for _ in range(12):
        n = int(rng.integers(3, 7))
        parts = [{"id": f"q{k}", "type": "cube",
                  "pos": [round(float(rng.uniform(0.15, 0.75)), 3),
                          round(float(rng.uniform(0.0, 0.55)), 3),
                          round(float(rng.choice([0.025, 0.075, 0.1, 0.125])), 3)]}
                 for k in range(n)]
        obj = {"parts": parts}
        if rng.random() < 0.5:
            obj["order"] = [p["id"] for p in parts[::-1]]
        lay = layout_from_obj(obj)
        r = repair(station, lay, time_limit=3)
        outcomes.add(r.status)
        assert r.status in ("optimal", "feasible", "infeasible"), r.reason
        if r.layout is not None:
            _reverified(station, lay, r)
    assert outcomes & {"optimal", "feasible"}


def test_impossible_is_proved_with_conflicting_rules(station):
    lay = cellspec.load_layout("rules/examples/tower3.json")
    r = repair(station, lay, blocked=[parse_blocked("z > 0.01", "ceiling")])
    assert r.status == "infeasible" and r.layout is None
    assert "keepout ceiling" in r.conflict and "gravity" in r.conflict


def test_already_valid(station):
    lay = cellspec.load_layout("rules/examples/tower3.json")
    r = repair(station, lay)
    assert r.status == "optimal" and r.already_valid and not r.moves


def test_blocked_box_with_unbounded_axis(station):
    lay = cellspec.load_layout("rules/examples/tower3.json")
    z = parse_blocked("box x [0.38, 0.50] y [0.15, 0.25]", "column")
    r = repair(station, lay, blocked=[z])
    fixed = layout_from_obj(r.layout)
    assert all(p[0] <= 0.355 + 1e-9 or p[1] >= 0.275 - 1e-9 for p in fixed.pos)


@pytest.mark.parametrize(("spec", "message"), [
    ("box x [0.2, 0.1]", "keep-out x range is empty: 0.2 >= 0.1"),
    ("garbage", "syntax error: expected a number, 'x', 'y', 'z', found 'garbage'"),
    ("", "syntax error: expected a number, 'x', 'y', 'z', found '}'"),
    ("box x [0, 1e400]", "1e400 is absurd for a cell (at most 10000 m)"),
    ("box x [0,1] x [0, 1]", "keep-out axis x is given twice"),
    # a region that tries to open a second cell is named as such, with no temporary file
    ("x > 0 }\ncell x {", "a second cell 'x': 'blocked' is already defined at --block:1:1"),
])
def test_bad_blocked_regions_are_named(spec, message):
    """--block is parsed from the string by the cell grammar (load_cell_text), no file."""
    with pytest.raises(CellspecError) as exc:
        parse_blocked(spec, "blocked_1")
    assert [str(d) for d in exc.value.diagnostics] == [
        f"--block: error: blocked region {spec!r}: {message}"]


def test_load_cell_text_is_load_cell_without_a_file(tmp_path):
    from cellspec.dsl.parser import load_cell, load_cell_text

    text = ("cell t {\n    units mm\n    workspace x [0, 500] y [0, 500] z [0, 300]\n"
            "    part cube size (50, 50, 50)\n}\n")
    f = tmp_path / "t.cell"
    f.write_text(text)
    a, b = load_cell_text(text, str(f)), load_cell(f)
    assert a.workspace == b.workspace and a.part_types == b.part_types  # mm scaled alike
    assert a.workspace.hi[0] == Fraction(1, 2)
    with pytest.raises(CellspecError, match="<s>:1:1: error: import needs a file"):
        load_cell_text("import physical\n" + text, "<s>")


def test_cli_repair(cli, tmp_path):
    out = tmp_path / "fixed.json"
    r = cli("repair", STATION, "rules/examples/tower3_broken.json", "-o", out,
            "--time-limit", "60")
    assert r.returncode == 0, r.stderr
    assert "moved c2" in r.stdout and "re-verified pass" in r.stdout
    assert cli("check", STATION, out).returncode == 0
    r = cli("repair", STATION, "rules/examples/tower3.json", "--block", "x > 0.6",
            "--block", "z > 0.08", "--format", "json", "--time-limit", "60")
    data = json.loads(r.stdout)
    assert r.returncode == 0 and data["status"] == "optimal" and data["parts_moved"] == 2
    # proving impossibility takes seconds; the limit bounds the whole verb (start-up too),
    # so a loaded machine gets room
    r = cli("repair", STATION, "rules/examples/tower3.json", "--block", "z > 0.01",
            "--time-limit", "60")
    assert r.returncode == 1 and "impossible" in r.stdout
    r = cli("repair", STATION, "rules/examples/tower3.json", "--block", "x >> 1")
    assert r.returncode == 2 and "--block" in r.stderr and "Traceback" not in r.stderr


def test_table_vi_files_regenerate_identically(tmp_path):
    import subprocess
    import sys

    gen = SCENARIOS.parent / "layouts" / "make_table_vi.py"
    p = subprocess.run([sys.executable, str(gen), "--out", str(tmp_path)], capture_output=True,
                       text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    for f in table_vi_files():
        assert (tmp_path / f.name).read_text() == f.read_text(), f.name

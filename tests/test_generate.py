"""cellspec generate: design specs built with CP-SAT, re-verified by clingo and the numpy
reference in the test itself; determinism, proved infeasibility, bad specs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import STATION, run_cellspec

import cellspec
from cellspec.dsl.design import load_designs
from cellspec.layout import layout_from_obj
from cellspec.solver.cpsat.generate import generate

DESIGNS = Path(__file__).resolve().parent.parent / "rules" / "scenarios" / "designs.cell"
KINDS = {"tower3": 3, "wall_y": 6, "pyramid10": 10, "staircase10": 10, "bridge7": 7,
         "arch7": 7, "canopy21": 21, "enclosure16": 16, "block12": 12, "packing12": 12,
         "packing_flat": 8, "yard": 14}

STABLE_CELL = """import physical
import stability
cell st {
    units m
    workspace x [0.20, 0.70] y [0.05, 0.50] z [0.00, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    robot irb120 model abb_irb120 base (0, 0.275, 0) reach 0.58 gripper vacuum
    default gripper parallel opening 0.07 depth 0.02
    keepout post box x [0.60, 0.70] y [0.40, 0.50] z [0, 0.30]
    tolerance contact 0.001
}
"""


@pytest.fixture(scope="module")
def station():
    return cellspec.load_cell(STATION)


@pytest.fixture(scope="module")
def designs():
    return {d.name: d for d in load_designs(DESIGNS)}


def _verified(cell, r) -> None:
    assert r.status in ("optimal", "feasible"), r.reason
    lay = layout_from_obj(r.layout)
    assert lay.order is not None and len(lay.order) == len(lay)
    for backend in ("clingo", "reference"):
        v = cellspec.check(cell, lay, backend=backend)
        assert v.verdict == "pass", (backend, v.violations)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_kind_generates_a_passing_layout(station, designs, name):
    r = generate(station, designs[name])
    _verified(station, r)
    assert len(r.layout["parts"]) == KINDS[name]
    assert r.status == "optimal"


def test_with_stability_and_keepout(tmp_path):
    """Every template shape also stands (the stability LP) and the solver moves a structure
    asked for inside a keep-out zone out of it."""
    f = tmp_path / "st.cell"
    kinds = ["tower(n=5)", "wall(width=4, height=3)", "pyramid(base=5)", "staircase(steps=5)",
             "bridge(span=2, pillar=2)", "canopy(pillars=4, height=4)",
             "enclosure(w=4, d=3, h=3)", "block(w=4, d=3, h=2)"]
    body = "".join(f"design k{i} {{ {k} at (0.62, 0.45) }}\n" for i, k in enumerate(kinds))
    body += "design pk { packing(n=30, region x [0.20, 0.70] y [0.05, 0.50]) }\n"
    f.write_text(STABLE_CELL + body, encoding="utf-8")
    cell = cellspec.load_cell(f)
    for d in load_designs(f):
        r = generate(cell, d)
        _verified(cell, r)
        for p in r.layout["parts"]:  # out of the post (x >= 0.60 and y >= 0.40)
            x, y, _ = p["pos"]
            assert x + 0.025 <= 0.60 + 1e-9 or y + 0.025 <= 0.40 + 1e-9


def test_constraints_honoured(station, designs):
    r = generate(station, designs["yard"])
    _verified(station, r)
    for p in r.layout["parts"]:
        x, y, _ = p["pos"]
        lo_x, hi_x, lo_y, hi_y = x - 0.025, x + 0.025, y - 0.025, y + 0.025
        # keep clear of box x [0.30, 0.45] y [0.15, 0.25] (touching allowed)
        assert hi_x <= 0.30 + 1e-9 or lo_x >= 0.45 - 1e-9 or hi_y <= 0.15 + 1e-9 \
            or lo_y >= 0.25 - 1e-9
        assert hi_x + hi_y <= 1.1 + 1e-9
        if p["id"].startswith("pyramid"):
            assert lo_x >= 0.5 - 1e-9 and lo_y >= 0.3 - 1e-9
    tower = next(s for s in r.structures if s.kind == "tower")
    assert tower.centre != tower.requested  # it was moved out of the zone


@pytest.mark.parametrize("name, words", [
    ("too_tall", "over the workspace top"),
    ("too_many", "even touching, the region holds at most 96 parts"),
    ("crowded", "too many parts for the workspace"),
    ("boxed_in", "no placement of the design in the cell satisfies: inside "),
])
def test_infeasible_specs_are_proved(station, designs, name, words):
    r = generate(station, designs[name], time_limit=5)
    assert r.status == "infeasible"
    assert words in r.reason
    assert r.layout is None and r.seconds < 5


def test_packing_beyond_the_gapped_lattice_is_unknown_not_infeasible(tmp_path, station):
    """60 cubes: the generator's gapped lattice holds 54, touching columns hold 96, so the
    generator cannot place them but has no proof that nobody can."""
    f = tmp_path / "p.cell"
    f.write_text("design p {\n    packing(n=60, region x [0.30, 0.50] y [0.10, 0.30])\n}\n",
                 encoding="utf-8")
    r = generate(station, load_designs(f)[0], time_limit=5)
    assert r.status == "unknown" and "holds at most 54 parts" in r.reason
    assert "not a proof" in r.reason


def test_two_packings_name_the_spacing_in_their_core(tmp_path, station):
    """Two one-level packings of 9 in the same region: each fits alone, together only if
    they touch. The guarded model (for the unsat core) has its own packing columns, so the
    core names the generator's spacing (it reused the first model's variables and named
    nothing)."""
    f = tmp_path / "p.cell"
    region = "region x [0.30, 0.50] y [0.10, 0.30], minimize height) [max height 0.05]"
    f.write_text(f"design p {{\n    packing(n=9, {region}\n    packing(n=9, {region}\n}}\n",
                 encoding="utf-8")
    r = generate(station, load_designs(f)[0], time_limit=5)
    assert r.status == "unknown" and r.conflict == ("spacing between structures",)
    assert "(spacing between structures)" in r.reason and "not a proof" in r.reason


def test_too_many_structures_proved(tmp_path, station):
    """90 single cubes fit the station's workspace touching (10 x 9): 91 are proved
    impossible; 57 do not fit with the generator's finger gap (8 x 7 = 56), which is
    no proof (touching towers could stand), so that answer is unknown, not infeasible."""
    f = tmp_path / "many.cell"
    f.write_text("design m {\n" + "    tower(n=1)\n" * 91 + "}\n", encoding="utf-8")
    r = generate(station, load_designs(f)[0], time_limit=5)
    assert r.status == "infeasible" and "at most 90 fit" in r.reason
    f.write_text("design m {\n" + "    tower(n=1)\n" * 57 + "}\n", encoding="utf-8")
    r = generate(station, load_designs(f)[0], time_limit=5)
    assert r.status == "unknown" and "at most 56 fit (8 x 7)" in r.reason
    assert "not a proof" in r.reason and r.layout is None


def test_shape_constraints_infeasible(tmp_path, station):
    f = tmp_path / "d.cell"
    f.write_text("design a { staircase(steps=3) at (0.4, 0.2) [symmetric x] }\n"
                 "design b { tower(n=3) at (0.4, 0.2) [count 4] }\n"
                 "design c { tower(n=5) at (0.4, 0.2) [max height 0.2] }\n"
                 "design d { packing(n=7, region x [0.3, 0.5] y [0.1, 0.3]) [symmetric] }\n",
                 encoding="utf-8")
    out = {d.name: generate(station, d) for d in load_designs(f)}
    assert "not symmetric" in out["a"].reason and out["a"].status == "infeasible"
    assert "count == 4" in out["b"].reason and out["b"].status == "infeasible"
    assert "max height" in out["c"].reason and out["c"].status == "infeasible"
    # 7 parts on a 3 x 3 lattice symmetric about x and y: the centre column takes the odd one
    _verified(station, out["d"])


def test_python_api_and_determinism(station):
    a = cellspec.generate(station, str(DESIGNS), design="yard")
    b = cellspec.generate(station, str(DESIGNS), design="yard")
    assert json.dumps(a.layout) == json.dumps(b.layout)
    assert a.to_json(timing=False) == b.to_json(timing=False)


def test_cli_same_bytes_twice_and_exit_codes(tmp_path):
    outs = []
    for k in range(2):
        o = tmp_path / f"out{k}.json"
        res = run_cellspec("generate", STATION, DESIGNS, "--design", "canopy21", "-o", o)
        assert res.returncode == 0, res.stderr
        assert "generated: design canopy21, 21 parts, re-verified pass" in res.stdout
        outs.append(o.read_bytes())
    assert outs[0] == outs[1]
    assert run_cellspec("check", STATION, tmp_path / "out0.json").returncode == 0
    res = run_cellspec("generate", STATION, DESIGNS, "--design", "too_many", "--format", "json")
    assert res.returncode == 1
    assert json.loads(res.stdout)["status"] == "infeasible"
    res = run_cellspec("generate", STATION, DESIGNS)
    assert res.returncode == 2 and "--design" in res.stderr


def test_bad_specs_name_file_line_col(tmp_path):
    f = tmp_path / "bad.cell"
    f.write_text("design d {\n"
                 "    towr(n=3) at (0.4, 0.2)\n"
                 "    wall(width=3, heigth=2, along=z) at (0.4, 0.2)\n"
                 "    packing(n=2.5) [symmetric z]\n"
                 "}\n", encoding="utf-8")
    res = run_cellspec("generate", STATION, f)
    assert res.returncode == 2
    err = res.stderr
    assert ("bad.cell:2:5: error: unknown structure 'towr'; did you mean 'tower'? (known: "
            "tower, wall") in err
    assert "bad.cell:3:19: error: unknown parameter 'heigth' of wall; did you mean 'height'? " \
        "(parameters: width, height, along, type)" in err
    assert "bad.cell:3:29: error: along must be x or y" in err
    assert "bad.cell:4:13: error: n must be a whole number" in err
    assert "packing needs a region" in err
    assert "Traceback" not in err
    g = tmp_path / "syntax.cell"
    g.write_text("design d {\n  tower(n=3) at (0.4, 0.2\n}\n", encoding="utf-8")
    res = run_cellspec("generate", STATION, g)
    assert res.returncode == 2 and "syntax.cell:3:1: error: syntax error" in res.stderr


def test_design_statements_do_not_disturb_the_cell(tmp_path):
    """A cell file may hold designs: it still loads, checks and tests as before."""
    f = tmp_path / "with_design.cell"
    f.write_text(Path(STATION).read_text(encoding="utf-8")
                 + "\ndesign here { tower(n=2) at (0.3, 0.3) }\n", encoding="utf-8")
    cell = cellspec.load_cell(f)
    r = cellspec.generate(cell, str(f))
    _verified(cell, r)
    assert run_cellspec("test", f).returncode == 0


def test_budget_limited_search_is_deterministic(station):
    """Five structures all asked for the same corner: the optimum is not proved within the
    deterministic budget, and the answer is still the same every time."""
    from cellspec.dsl.design import DesignSpec

    ds = load_designs(DESIGNS)  # tower3, wall_y, pyramid10, staircase10, block12
    spec = DesignSpec(name="corner", source=ds[0].source, structures=tuple(
        ds[i].structures[0].model_copy(update={"at": (0.3, 0.1)}) for i in (0, 1, 2, 3, 8)))
    a = generate(station, spec, time_limit=4)
    b = generate(station, spec, time_limit=4)
    _verified(station, a)
    assert a.layout == b.layout and a.status == b.status


def test_rule_not_encoded_gives_unknown_never_success(tmp_path):
    """A cell error rule the generator does not encode: the layout fails the re-check, so the
    answer is unknown (naming the rule), never a built layout."""
    f = tmp_path / "low.cell"
    f.write_text(Path(STATION).read_text(encoding="utf-8")
                 + '\nrule low "{p} is too high" : forall p: p.top <= 0.1\n'
                 + "design d { tower(n=3) at (0.4, 0.2) }\n", encoding="utf-8")
    cell = cellspec.load_cell(f)
    r = cellspec.generate(cell, str(f))
    assert r.status == "unknown" and r.layout is None and "low(" in r.reason
    res = run_cellspec("generate", f, f)
    assert res.returncode == 2 and "unknown:" in res.stdout


def test_dense_block_needs_a_vacuum_gripper(tmp_path):
    f = tmp_path / "par.cell"
    f.write_text("import physical\ncell par {\n    units m\n"
                 "    workspace x [0.20, 0.70] y [0.05, 0.50] z [0.00, 0.30]\n"
                 "    surface table z 0\n    part cube size (0.05, 0.05, 0.05)\n"
                 "    default gripper parallel opening 0.07 depth 0.02\n}\n"
                 "design a { block(w=2, d=2, h=1) at (0.4, 0.2) }\n"
                 "design b { block(w=3, d=1, h=2) at (0.4, 0.2) }\n", encoding="utf-8")
    cell = cellspec.load_cell(f)
    ra = cellspec.generate(cell, str(f), design="a")
    assert ra.status == "infeasible" and "vacuum" in ra.reason
    _verified(cell, cellspec.generate(cell, str(f), design="b"))

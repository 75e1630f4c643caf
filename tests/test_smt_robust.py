"""Tolerance-robust verdicts (``check --robust``, ``cellspec.prove_robust``).

Properties: a proved verdict never changes when the layout is re-checked by the
reference evaluator at random displacements within the tolerance (>= 10 000 samples);
every counterexample really changes the verdict when re-checked by clingo and by the
reference, and stays within the tolerance.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from conftest import STATION

import cellspec
from cellspec.layout import layout_from_obj
from cellspec.solver.formal.robust import displaced_layout, prove_robust
from cellspec.solver.instance import build_instance
from cellspec.solver.reference import ReferenceEvaluator
from cellspec.solver.verify import check

TWO_APART = {"parts": [{"id": "a", "type": "cube", "pos": [0.40, 0.20, 0.025]},
                       {"id": "b", "type": "cube", "pos": [0.451, 0.20, 0.025]}],
             "order": ["a", "b"]}
TOWER = {"parts": [{"id": "c1", "type": "cube", "pos": [0.40, 0.20, 0.025]},
                   {"id": "c2", "type": "cube", "pos": [0.40, 0.20, 0.075]}],
         "order": ["c1", "c2"]}


def _fails(cell, inst, rules) -> bool:
    ref = ReferenceEvaluator(inst)
    return any(ref.violations(r) for r in rules)


def _error_rules(cell, layout):
    from cellspec.solver.formal.common import error_rules as _error_rules

    return _error_rules(cell, layout)


def test_one_mm_gap_is_not_robust_to_2mm(station_cell):
    layout = layout_from_obj(TWO_APART)
    assert check(station_cell, layout).verdict == "pass"
    r = prove_robust(station_cell, layout, 0.002)
    assert r.status == "refuted" and not r.ok
    assert r.verdict == "pass"
    assert r.rule == "no_overlap" and sorted(r.parts) == ["a", "b"]
    w = layout_from_obj(r.witness)
    v = check(station_cell, w)
    assert v.verdict == "fail" and any(x.rule == "no_overlap" for x in v.violations)
    moved = np.abs(np.array(w.pos) - np.array(layout.pos))
    assert moved.max() <= 0.002 + 1e-9 and np.all(moved[:, 2] == 0)
    assert r.witness_verdict is not None and r.witness_verdict["verdict"] == "fail"


def test_tower_is_robust_to_2mm(station_cell):
    r = prove_robust(station_cell, layout_from_obj(TOWER), 0.002)
    assert r.status == "proved" and r.ok and r.witness is None


def test_same_gap_is_robust_to_half_a_mm(station_cell):
    r = prove_robust(station_cell, layout_from_obj(TWO_APART), 0.0005)
    assert r.status == "proved" and r.ok


def test_a_failing_layout_that_can_be_fixed_by_moving(station_cell):
    # b overlaps a by 3 mm (eps is 1 mm): moving each 1 mm or more apart makes it pass
    obj = json.loads(json.dumps(TWO_APART))
    obj["parts"][1]["pos"][0] = 0.447
    layout = layout_from_obj(obj)
    assert check(station_cell, layout).verdict == "fail"
    r = prove_robust(station_cell, layout, 0.002)
    assert r.status == "refuted" and r.verdict == "fail" and r.rule is None
    assert check(station_cell, layout_from_obj(r.witness)).verdict == "pass"
    assert prove_robust(station_cell, layout, 0.0002).status == "proved"


def test_encodings_agree(station_cell):
    for obj in (TWO_APART, TOWER):
        a = prove_robust(station_cell, layout_from_obj(obj), 0.002, encoding="api")
        b = prove_robust(station_cell, layout_from_obj(obj), 0.002, encoding="smtlib")
        c = prove_robust(station_cell, layout_from_obj(obj), 0.002, prune=False)
        assert a.status == b.status == c.status


def test_deterministic(station_cell):
    a = prove_robust(station_cell, layout_from_obj(TWO_APART), 0.002)
    b = prove_robust(station_cell, layout_from_obj(TWO_APART), 0.002)
    assert a.witness == b.witness and a.rule == b.rule


def test_binding_budget_gives_unknown_never_proved(station_cell):
    r = prove_robust(station_cell, layout_from_obj(TOWER), 0.002, max_bindings=1)
    assert r.status == "unknown" and "bindings" in r.reason and not r.ok


@pytest.mark.parametrize("tol", [-0.001, float("nan"), float("inf"), 5.0, "abc"])
def test_bad_tolerance(station_cell, tol):
    with pytest.raises(cellspec.CellspecError, match="tolerance"):
        prove_robust(station_cell, layout_from_obj(TOWER), tol)


def _random_layout(rng: np.random.Generator) -> dict:
    """Cubes in rows and stacks with gaps around 0-3 mm, listed bottom-up."""
    parts = []
    n_cols = int(rng.integers(1, 4))
    x = 0.30
    for c in range(n_cols):
        h = int(rng.integers(1, 3))
        off = [0.0, 0.0]
        for k in range(h):
            if k:
                off = [float(rng.choice([0.0, 0.0, 0.004, 0.02, 0.024])), 0.0]
            parts.append({"id": f"p{c}_{k}", "type": "cube",
                          "pos": [round(x + off[0], 4), 0.2, round(0.025 + 0.05 * k, 4)]})
        x += 0.05 + float(rng.choice([0.0005, 0.001, 0.002, 0.003, 0.004, 0.006, 0.01]))
    obj = {"parts": parts}
    if rng.random() < 0.7:
        obj["order"] = [p["id"] for p in sorted(parts, key=lambda p: p["pos"][2])]
    return obj


def _without_stability(cell):
    """The cell as `stability off` would load it: these tests are about Z3's proofs of the
    geometric rules; stability's robustness is tested in test_stability.py."""
    return cell.model_copy(update={"rules": tuple(r for r in cell.rules
                                                  if not r.name.startswith("stability"))})


def test_property_proved_never_breaks_refuted_always_breaks():
    """>= 10 000 random displacements of proved layouts, re-checked by the reference
    evaluator; every refuted layout's witness re-checked by the reference."""
    cell = _without_stability(cellspec.load_cell(str(STATION)))  # Z3's geometric proofs
    rng = np.random.default_rng(7)
    samples = refuted = proved = 0
    for _ in range(400):
        if samples >= 10_000 and refuted >= 5:
            break
        layout = layout_from_obj(_random_layout(rng))
        tol = float(rng.choice([0.0005, 0.001, 0.002, 0.003]))
        r = prove_robust(cell, layout, tol)
        assert r.status in ("proved", "refuted"), r.reason
        inst = build_instance(cell, layout)
        rules = _error_rules(cell, layout)
        nominal_fail = r.verdict == "fail"
        if r.status == "refuted":
            refuted += 1
            w = build_instance(cell, layout_from_obj(r.witness))
            assert _fails(cell, w, rules) != nominal_fail
            d = (w.boxes - inst.boxes) // 2
            assert np.abs(d).max() <= r.steps and np.all(d[:, 4:] == 0)
            continue
        proved += 1
        t = r.steps
        for _ in range(250):
            dx = rng.integers(-t, t + 1, inst.n)
            dy = rng.integers(-t, t + 1, inst.n)
            edge = rng.random(inst.n) < 0.5  # the extremes matter most
            dx[edge] = rng.choice([-t, t], int(edge.sum()))
            b = inst.boxes.copy()
            b[:, 0:2] += 2 * dx[:, None]
            b[:, 2:4] += 2 * dy[:, None]
            assert _fails(cell, dataclasses.replace(inst, boxes=b), rules) == nominal_fail, (
                f"proved robust, but breaks at dx={dx.tolist()} dy={dy.tolist()}")
            samples += 1
    assert samples >= 10_000 and refuted >= 5 and proved >= 20


def test_displaced_layout_round_trips(station_cell):
    layout = layout_from_obj(TWO_APART)
    inst = build_instance(station_cell, layout)
    w = displaced_layout(layout, inst.boxes, np.array([3, -2]), np.array([0, 5]))
    wi = build_instance(station_cell, w)
    assert ((wi.boxes - inst.boxes) // 2).tolist() == [[3, 3, 0, 0, 0, 0], [-2, -2, 5, 5, 0, 0]]


# --- the command line ---------------------------------------------------------------------

def test_cli_robust_pass(cli, tmp_path):
    p = tmp_path / "tower.json"
    p.write_text(json.dumps(TOWER))
    r = cli("check", STATION, p, "--robust", "0.002")
    assert r.returncode == 0, r.stderr
    assert "pass (robust to 0.002 m)" in r.stdout
    r = cli("check", STATION, p, "--robust", "0.002", "--format", "json")
    out = json.loads(r.stdout)
    assert out["verdict"] == "pass"
    assert out["robust"]["status"] == "proved" and out["robust"]["witness"] is None
    assert out["robust"]["tolerance"] == 0.002 and out["robust"]["rule"] is None


def test_cli_robust_refuted(cli, tmp_path):
    p = tmp_path / "apart.json"
    p.write_text(json.dumps(TWO_APART))
    wf = tmp_path / "w.json"
    r = cli("check", STATION, p, "--robust", "0.002", "--witness", wf)
    assert r.returncode == 1
    assert "pass, but not robust to 0.002 m: no_overlap breaks" in r.stdout
    assert "no_overlap(a, b) fails when displaced" in r.stdout
    r2 = cli("check", STATION, wf)
    assert r2.returncode == 1 and "no_overlap" in r2.stdout
    r = cli("check", STATION, p, "--robust", "0.002", "--format", "json")
    rob = json.loads(r.stdout)["robust"]
    assert rob["status"] == "refuted" and rob["rule"] == "no_overlap"
    assert rob["witness"]["parts"][0]["id"] == "a"


@pytest.mark.parametrize("tol", ["-0.002", "5", "nan", "x"])
def test_cli_bad_tolerance(cli, tmp_path, tol):
    p = tmp_path / "tower.json"
    p.write_text(json.dumps(TOWER))
    wf = tmp_path / "w.json"
    r = cli("check", STATION, p, f"--robust={tol}", "--witness", wf)
    assert r.returncode == 2 and "tolerance" in r.stderr and "Traceback" not in r.stderr
    assert not wf.exists() and r.stdout == ""


# --- `robust T` / `not robust T` in rule-file tests ----------------------------------------

SYNTAX_CELL = """\
import physical
cell c {
    workspace x [0, 1] y [0, 1] z [0, 1]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
    default gripper parallel opening 0.07 depth 0.02
}
test apart {
    layout {
        a cube at (0.40, 0.20, 0.025)
        b cube at (0.451, 0.20, 0.025)
    }
    expect pass
    %s
}
"""


def _run(tmp_path, item: str):
    from cellspec.testing.runner import run_file

    p = tmp_path / "t.cell"
    p.write_text(SYNTAX_CELL % item)
    return run_file(str(p))


def test_robust_syntax_results(tmp_path):
    res, errs = _run(tmp_path, "not robust 0.002")
    assert not errs and res[0].status == "passed"
    res, errs = _run(tmp_path, "robust 0.0005")
    assert not errs and res[0].status == "passed"
    res, errs = _run(tmp_path, "robust 0.002")
    assert res[0].status == "failed"
    assert "expected robust to 0.002 m: no_overlap(a, b) breaks when displaced" in res[0].message
    res, errs = _run(tmp_path, "not robust 0.0005")
    assert res[0].status == "failed" and "expected not robust" in res[0].message


@pytest.mark.parametrize("item,msg", [
    ("robust 0.002\n    robust 0.001", "robust is given twice"),
    ("robust 0.5", "robust tolerance must be between 0 and 0.1 m"),
])
def test_robust_syntax_errors(tmp_path, item, msg):
    res, errs = _run(tmp_path, item)
    assert not res and any(msg in e.message for e in errs), errs


def test_robust_scenarios_pass(cli):
    sc = STATION.parent.parent / "scenarios"
    r = cli("test", sc / "robust.cell", sc / "robust_gravity.cell")
    assert r.returncode == 0, r.stdout
    assert "6 passed, 0 failed" in r.stdout


@pytest.mark.slow
def test_property_features_cell_random_layouts(features_cell):
    """Every language feature (count, nested quantifiers, zones, half-spaces, surfaces):
    proved verdicts survive sampled displacements, witnesses change the verdict."""
    from hypothesis import given, settings
    from test_differential import SETTINGS, layouts, to_obj

    rng = np.random.default_rng(11)
    seen = {"proved": 0, "refuted": 0}

    @settings(max_examples=150, **SETTINGS)
    @given(layouts(max_parts=5))
    def run(case):
        parts, order = case
        layout = layout_from_obj(to_obj(parts, order), "<random>")
        tol = float(rng.choice([0.0005, 0.001, 0.002]))
        # one or two rules at a time, so that passes and fails both occur
        errs = [r for r in features_cell.rules if r.severity == "error"
                and not r.name.startswith("stability")]  # left to the LP (test_stability)
        pick = rng.choice(len(errs), int(rng.integers(1, 3)), replace=False)
        cell = features_cell.model_copy(update={"rules": tuple(errs[k] for k in sorted(pick))})
        r = prove_robust(cell, layout, tol)
        assert r.status in ("proved", "refuted"), r.reason
        seen[r.status] += 1
        inst = build_instance(cell, layout)
        rules = _error_rules(cell, layout)
        nominal_fail = r.verdict == "fail"
        if r.status == "refuted":
            w = build_instance(cell, layout_from_obj(r.witness))
            assert _fails(cell, w, rules) != nominal_fail
            return
        t = r.steps
        for _ in range(40):
            dx = rng.integers(-t, t + 1, inst.n)
            dy = rng.integers(-t, t + 1, inst.n)
            b = inst.boxes.copy()
            b[:, 0:2] += 2 * dx[:, None]
            b[:, 2:4] += 2 * dy[:, None]
            assert _fails(cell, dataclasses.replace(inst, boxes=b), rules) == nominal_fail, \
                f"breaks at dx={dx.tolist()} dy={dy.tolist()}"

    run()
    assert seen["proved"] >= 5 and seen["refuted"] >= 3, seen


def test_time_limit_gives_unknown_never_proved(tmp_path):
    """A robust check that cannot finish within its limit says unknown, with the reason."""
    p = tmp_path / "big.cell"
    p.write_text("import physical\ncell big {\n    workspace x [0, 4] y [0, 4] z [0, 0.3]\n"
                 "    surface table z 0\n    part cube size (0.05, 0.05, 0.05)\n"
                 "    default gripper parallel opening 0.07 depth 0.02\n"
                 "    stability off\n}\n")  # thin-ledge bridges: Z3's gravity proof
    cell = cellspec.load_cell(str(p))
    parts = []
    for u in range(100):  # bridges: a roof on two pillars, 2.5 mm overlap each (needs Z3)
        i, j = divmod(u, 10)
        x0, y = 0.1 + i * 0.16, round(0.1 + j * 0.065, 4)
        parts += [{"id": f"l{u}", "type": "cube", "pos": [round(x0, 4), y, 0.025]},
                  {"id": f"r{u}", "type": "cube", "pos": [round(x0 + 0.095, 4), y, 0.025]},
                  {"id": f"t{u}", "type": "cube", "pos": [round(x0 + 0.0475, 4), y, 0.075]}]
    obj = {"parts": parts, "order": [q["id"] for q in sorted(parts, key=lambda q: q["pos"][2])]}
    layout = layout_from_obj(obj)
    assert prove_robust(cell, layout, 0.001).status == "proved"
    r = prove_robust(cell, layout, 0.001, timeout=0.001)
    assert r.status == "unknown" and r.reason and not r.ok

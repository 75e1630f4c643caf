"""Z3 on yawed boxes and cylinders (issue 22 item 3, docs/shapes.md): the linear encoding
(cellspec/solver/smt/shapes.py) against the exact kernel (cellspec/core/shapes.py).

- every relation at fixed positions equals the kernel's, pair by pair, on random layouts
  (yawed boxes, quarter turns, cylinders, a gripper opening and depth, zones);
- ``check --robust``: a proved verdict holds under sampled displacements checked by the
  kernel, a refutation's witness changes the kernel's verdict, T = 0 is always proved;
- a moving cylinder in a distance relation is ``unknown`` (``unsupported``), naming the rule;
- ``check --backend z3`` and ``explain`` decide shapes.

The nominal verdict and the witness re-check are clingo's (kernel-decided relation atoms);
the oracle here is the kernel itself."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from conftest import run_cellspec

import cellspec
from cellspec.core import shapes as ks
from cellspec.layout import layout_from_obj
from cellspec.solver.formal.explain import explain
from cellspec.solver.formal.robust import prove_robust
from cellspec.solver.instance import build_instance
from cellspec.solver.smt.backend import fixed_problem
from cellspec.solver.smt.formula import Builder
from cellspec.solver.smt.ground import Grounder
from cellspec.solver.verify import check

CELL = """\
cell c {
    workspace x [0.3, 0.7] y [0.3, 0.7] z [0, 0.5]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    part slab size (0.10, 0.04, 0.02)
    part can cylinder radius 0.03 height 0.1 mass 0.2
    default gripper parallel opening 0.07 depth 0.02
    keepout post box x [0.45, 0.55] y [0.30, 0.40] z [0.00, 0.30]
    keepout corner : x + 2 * y < 1.25
    stability off
}
rule no_overlap "{p} overlaps {q}" : forall {p, q}: not overlaps(p, q)
rule workspace "{p} leaves the workspace" : forall p: inside(p, workspace)
"""
KEEP = """\
rule keepout "{p} enters {k}" : forall p: forall k in keepout: not intersects(p, k)
"""
HEIGHT = {"cube": 0.05, "slab": 0.02, "can": 0.1}


@pytest.fixture(scope="module")
def cell(tmp_path_factory):
    f = tmp_path_factory.mktemp("c") / "c.cell"
    f.write_text(CELL)
    return cellspec.load_cell(f)


@pytest.fixture(scope="module")
def keep_cell(tmp_path_factory):
    f = tmp_path_factory.mktemp("k") / "k.cell"
    f.write_text(CELL + KEEP)
    return cellspec.load_cell(f)


def _random(rng, n: int, cyl: bool = True, spread: float = 0.12) -> dict:
    parts = []
    kinds = ["cube", "slab", "can"] if cyl else ["cube", "slab"]
    for k in range(n):
        t = str(rng.choice(kinds))
        z = HEIGHT[t] / 2 + float(rng.choice([0.0, 0.0, 0.05, 0.02]))
        yaw = float(rng.choice([0.0, 90.0, 45.0, 30.0, -60.0, rng.uniform(-180, 180)]))
        parts.append({"id": f"p{k}", "type": t, "yaw": round(yaw, 3),
                      "pos": [round(float(rng.uniform(0.4, 0.4 + spread)), 4),
                              round(float(rng.uniform(0.4, 0.4 + spread)), 4), round(z, 4)]})
    return {"parts": parts}


SIZE = {"cube": (0.05, 0.05), "slab": (0.10, 0.04)}


def _row(rng, n: int) -> dict:
    """Boxes in a row along x, each enclosing box a few millimetres from the next (a gap
    or an overlap): verdicts near their thresholds, corners near each other."""
    parts, x = [], 0.30
    for k in range(n):
        t = str(rng.choice(["cube", "slab"]))
        yaw = float(rng.choice([45.0, 30.0, 0.0, round(float(rng.uniform(-90, 90)), 2)]))
        c, s = abs(np.cos(np.radians(yaw))), abs(np.sin(np.radians(yaw)))
        ex = (c * SIZE[t][0] + s * SIZE[t][1]) / 2
        x += ex + (float(rng.uniform(-0.003, 0.003)) if k else float(rng.uniform(0, 0.004)))
        parts.append({"id": f"p{k}", "type": t, "yaw": yaw,
                      "pos": [round(x, 4), round(0.45 + float(rng.uniform(-0.01, 0.01)), 4),
                              HEIGHT[t] / 2]})
        x += ex
    return {"parts": parts}


def test_every_relation_at_fixed_positions_is_the_kernels(cell):
    rng = np.random.default_rng(7)
    seen: dict[str, int] = {}
    for _ in range(15):
        inst = build_instance(cell, layout_from_obj(_random(rng, 7)))
        if inst.shapes is None:
            continue
        sh, e = inst.shapes, inst.eps
        gr = Grounder(fixed_problem(inst, [], prune=False), Builder({}))
        for i, j in itertools.permutations(range(inst.n), 2):
            ii, jj = np.array([i]), np.array([j])
            want = {"contact": ks.contact(sh, ii, jj, e), "overlaps": ks.overlaps(sh, ii, jj, e),
                    "supports": ks.supports(sh, ii, jj, e), "above": ks.above(sh, ii, jj, e)}
            for name, w in want.items():
                assert gr.pair_rel(name, i, j) is bool(w[0]), (name, i, j)
                seen[name] = seen.get(name, 0) + int(w[0])
            for d in (0, 40, 200):
                assert gr.pair_rel("near", i, j, d) is bool(ks.near(sh, ii, jj, d)[0])
            for ax in "xy":
                w = ks.flanks(sh, ii, jj, ax, inst.opening, inst.depth, e)[0]
                assert gr.pair_rel("flanks", i, j, ax) is bool(w), ("flanks", ax, i, j)
                seen["flanks"] = seen.get("flanks", 0) + int(w)
        for k in range(inst.n):
            kk = np.array([k])
            for zn, z in inst.zones.items():
                if isinstance(z, ks.g.HalfSpaceU):
                    win = ks.inside_half(sh, kk, z, e)[0]
                    wint = ks.intersects_half(sh, kk, z, e)[0]
                else:
                    win = ks.inside_box(sh, kk, z.lo, z.hi, e)[0]
                    wint = ks.intersects_box(sh, kk, z.lo, z.hi, e)[0]
                assert gr.zone_rel("inside", k, zn) is bool(win), ("inside", k, zn)
                assert gr.zone_rel("intersects", k, zn) is bool(wint), ("intersects", k, zn)
                seen[f"in_{zn}"] = seen.get(f"in_{zn}", 0) + int(win)
                seen[f"x_{zn}"] = seen.get(f"x_{zn}", 0) + int(wint)
    # each relation was true often enough (inside a keep-out: rarely, by construction)
    assert all(v > 5 for k, v in seen.items() if k not in ("in_post", "in_corner")), seen


def _moved(sh: ks.ShapesU, dx: np.ndarray, dy: np.ndarray) -> ks.ShapesU:
    box = sh.box.copy()
    box[:, 0:2] += 2 * dx[:, None]
    box[:, 2:4] += 2 * dy[:, None]
    return dataclasses.replace(sh, cx=sh.cx + 2 * dx, cy=sh.cy + 2 * dy, box=box)


def _kernel_fails(sh: ks.ShapesU, inst) -> bool:
    """no_overlap and workspace decided by the kernel alone (the oracle)."""
    n = len(sh)
    i, j = np.triu_indices(n, 1)
    ws = inst.zones["workspace"]
    return bool(ks.overlaps(sh, i, j, inst.eps).any()
                or not ks.inside_box(sh, np.arange(n), ws.lo, ws.hi, inst.eps).all())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_robust_verdicts_hold_under_sampled_displacements(cell, seed):
    rng = np.random.default_rng(seed)
    counts = {"proved": 0, "refuted": 0}
    for _ in range(6):
        lay = layout_from_obj(_row(rng, 5))
        inst = build_instance(cell, lay)
        if inst.shapes is None:
            continue
        nominal_fails = _kernel_fails(inst.shapes, inst)
        for steps in (0, 3, 20):
            r = prove_robust(cell, lay, steps / 10000)
            assert r.verdict == ("fail" if nominal_fails else "pass")
            if steps == 0:
                assert r.status == "proved", r.reason
            counts[r.status] = counts.get(r.status, 0) + 1
            if r.status == "proved":
                for _ in range(60):
                    dx = rng.integers(-steps, steps + 1, inst.n)
                    dy = rng.integers(-steps, steps + 1, inst.n)
                    assert _kernel_fails(_moved(inst.shapes, dx, dy), inst) == nominal_fails
            elif r.status == "refuted":
                w = build_instance(cell, layout_from_obj(r.witness))
                assert _kernel_fails(w.shapes, inst) != nominal_fails
                moved = np.abs(np.asarray(layout_from_obj(r.witness).pos) - lay.pos)
                assert moved.max() <= steps / 10000 + 1e-9
    assert counts["proved"] and counts["refuted"], counts


DIAMONDS = {"parts": [{"id": "a", "type": "cube", "pos": [0.4, 0.4, 0.025], "yaw": 45},
                      {"id": "b", "type": "cube", "pos": [0.4716, 0.4, 0.025], "yaw": 45}]}


def test_45_degree_boxes_in_a_row(cell):
    # corners 0.9 mm apart along x (half diagonal 35.36 mm): robust to 0.4 mm, not to 2 mm
    lay = layout_from_obj(DIAMONDS)
    assert check(cell, lay, backend="z3").verdict == "pass"
    assert prove_robust(cell, lay, 0.0004).status == "proved"
    r = prove_robust(cell, lay, 0.002)
    assert r.status == "refuted" and r.rule == "no_overlap" and set(r.parts) == {"a", "b"}


def test_a_box_at_its_enclosing_box_is_not_decided_as_one(cell):
    # the enclosing boxes overlap by 10 mm, the 45-degree footprints do not touch
    obj = {"parts": [{"id": "a", "type": "cube", "pos": [0.4, 0.4, 0.025], "yaw": 45},
                     {"id": "b", "type": "cube", "pos": [0.43, 0.43, 0.025], "yaw": 0}]}
    lay = layout_from_obj(obj)
    assert check(cell, lay, backend="z3").verdict == "fail"  # the corner of a enters b
    obj["parts"][1]["pos"] = [0.45, 0.45, 0.025]
    assert check(cell, layout_from_obj(obj), backend="z3").verdict == "pass"
    assert prove_robust(cell, layout_from_obj(obj), 0.001).status == "proved"


def test_a_moving_cylinder_next_to_a_part_is_refused_by_name(cell):
    obj = {"parts": [{"id": "can1", "type": "can", "pos": [0.4, 0.4, 0.05]},
                     {"id": "b", "type": "cube", "pos": [0.4551, 0.4, 0.025], "yaw": 20}]}
    r = prove_robust(cell, layout_from_obj(obj), 0.001)
    assert r.status == "unknown" and r.reason.startswith("unsupported: rule 'no_overlap'")
    assert "can1" in r.reason and "not linear" in r.reason
    # far from everything, its only relation is inside(workspace): linear, proved
    obj["parts"][1]["pos"] = [0.6, 0.4, 0.025]
    assert prove_robust(cell, layout_from_obj(obj), 0.001).status == "proved"
    obj["parts"][0]["pos"] = [0.3295, 0.4, 0.05]  # 0.5 mm outside, eps 1 mm
    r = prove_robust(cell, layout_from_obj(obj), 0.001)
    assert r.verdict == "pass" and r.status == "refuted" and r.rule == "workspace"


def _keep_fails(sh: ks.ShapesU, inst) -> bool:
    """The keepout rule decided by the kernel alone."""
    idx = np.arange(len(sh))
    for z in (inst.zones["post"], inst.zones["corner"]):
        hit = (ks.intersects_half(sh, idx, z, inst.eps) if isinstance(z, ks.g.HalfSpaceU)
               else ks.intersects_box(sh, idx, z.lo, z.hi, inst.eps))
        if hit.any():
            return True
    return False


@pytest.mark.parametrize("cy", [0.4588, 0.4592, 0.4600, 0.4650])
def test_keepouts_and_half_spaces_under_displacement(keep_cell, cy):
    # a 30-degree slab near the half-space keep-out x + 2y < 1.25 (its lowest x + 2y is
    # cx + 2cy - 0.1179 m): the verdict and its robustness agree with the kernel
    lay = layout_from_obj({"parts": [{"id": "s", "type": "slab", "pos": [0.45, cy, 0.01],
                                      "yaw": 30}]})
    inst = build_instance(keep_cell, lay)
    fails = _kernel_fails(inst.shapes, inst) or _keep_fails(inst.shapes, inst)
    rng = np.random.default_rng(0)
    for steps in (0, 2, 10):
        r = prove_robust(keep_cell, lay, steps / 10000)
        assert r.verdict == ("fail" if fails else "pass")
        assert r.status == "proved" if steps == 0 else r.status in ("proved", "refuted")
        if r.status == "proved":
            for _ in range(100):
                d = rng.integers(-steps, steps + 1, (2, 1))
                m = _moved(inst.shapes, d[0], d[1])
                assert (_kernel_fails(m, inst) or _keep_fails(m, inst)) == fails
        else:
            w = build_instance(keep_cell, layout_from_obj(r.witness)).shapes
            assert (_kernel_fails(w, inst) or _keep_fails(w, inst)) != fails


def test_z3_backend_and_explain_decide_shapes(cell):
    obj = {"parts": [{"id": "a", "type": "cube", "pos": [0.4, 0.4, 0.025], "yaw": 45},
                     {"id": "b", "type": "cube", "pos": [0.46, 0.4, 0.025], "yaw": 45},
                     {"id": "c", "type": "can", "pos": [0.55, 0.4, 0.05]},
                     {"id": "d", "type": "slab", "pos": [0.66, 0.5, 0.01], "yaw": 10}]}
    lay = layout_from_obj(obj)
    v = check(cell, lay, backend="z3")
    assert v.verdict == "fail" and v.to_json(timing=False)["violations"] == check(
        cell, lay).to_json(timing=False)["violations"]
    assert sorted((x.rule, x.parts) for x in v.violations) == [
        ("no_overlap", ("a", "b")), ("workspace", ("d",))]
    e = explain(cell, lay, max_causes=3)
    assert e.status == "explained"
    assert sorted((c.rules[0].rule, c.parts) for c in e.causes) == [
        ("no_overlap", ("a", "b")), ("workspace", ("d",))]


def test_cli_robust_on_shapes(tmp_path, cell):
    c = tmp_path / "c.cell"
    c.write_text(CELL)
    lay = tmp_path / "l.json"
    import json

    lay.write_text(json.dumps(DIAMONDS))
    p = run_cellspec("check", c, lay, "--backend", "z3", "--robust", "0.0004")
    assert p.returncode == 0, p.stdout + p.stderr
    p = run_cellspec("check", c, lay, "--backend", "z3", "--robust", "0.002")
    assert p.returncode == 1 and "not robust" in p.stdout, p.stdout + p.stderr
    p = run_cellspec("check", c, lay, "--robust", "0.002", "--format", "json")
    out = json.loads(p.stdout)
    assert p.returncode == 1 and out["robust"]["status"] == "refuted", p.stdout + p.stderr

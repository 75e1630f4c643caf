"""CI guard of issue 14: on seeded random structures of every family, ``check`` (the
dual-arm station's semantics: ``import physical``) passes nothing that falls in the
pybullet settle oracle. False fails are recorded (printed, and as JUnit properties), not
enforced; the benchmark (bench/physics_agreement.py) reports them per family and margin."""

from __future__ import annotations

import pytest
from structure_families import FAMILIES, load_cell_variant, structures

from cellspec.robots import agreement as ag
from cellspec.solver.verify import check

N = 104  # 13 per family
SEED = 2026


@pytest.fixture(scope="module")
def labelled():
    """Settle labels (with the noise filter) and check verdicts of the structures."""
    cell = load_cell_variant()  # the station with the benchmark's part types
    noise = ag.measure_noise(cell)
    out = []
    for s in structures(N, SEED):
        lab = ag.label(cell, s.layout, noise, seed=SEED, index=s.index)
        v = check(cell, s.layout)
        out.append((s, lab, v))
    return noise, out


def test_oracle_noise_is_far_below_the_threshold(labelled):
    noise, _ = labelled
    assert all(x["verdict"] == "stand" for x in noise.standers), noise.standers
    assert noise.displacement < 0.2 * ag.st.FALL_DISPLACEMENT
    assert noise.rotation_deg < 0.3 * ag.st.FALL_ROTATION_DEG


def test_structures_cover_every_family_with_both_outcomes(labelled):
    """The set is not trivial: every family is there, most of it kept, and many of its
    structures fall and many stand (else 0 false passes would prove nothing)."""
    _, rows = labelled
    kept = [(s, lab) for s, lab, _ in rows if lab.drop is None]
    assert len(kept) >= 0.9 * N
    assert {s.family for s, _ in kept} == set(FAMILIES)
    falls = sum(lab.fall for _, lab in kept)
    assert 0.2 * len(kept) <= falls <= 0.8 * len(kept)


def test_no_false_pass_against_settle(labelled, record_property):
    _, rows = labelled
    kept = [(s, lab, v) for s, lab, v in rows if lab.drop is None]
    conf = ag.confusion([(s.family, lab.fall, v.verdict) for s, lab, v in kept])
    false_passes = [f"{s.family} #{s.index} ({s.note}): {lab.message}"
                    for s, lab, v in kept if ag.outcome(lab.fall, v.verdict) == "false_pass"]
    false_fails = [f"{s.family} #{s.index} ({s.note}): {sorted({x.rule for x in v.violations})}"
                   for s, lab, v in kept if ag.outcome(lab.fall, v.verdict) == "false_fail"]
    # false fails are recorded, not enforced (the margin trades them for safety; the bench
    # reports them per margin): printed, and in the JUnit XML as properties
    print(f"confusion: {conf['all']}; false fails: {false_fails}")
    record_property("confusion", conf["all"])
    record_property("false_fails", false_fails)
    assert not false_passes, "\n".join(false_passes)
    assert conf["all"]["unknown"] == 0


def test_generator_is_seeded_buildable_and_overlap_free():
    """Same seed, same structures; every one has a full bottom-up order; no overlaps."""
    import numpy as np

    a, b = structures(40, 3), structures(40, 3)
    assert [s.layout.to_json() for s in a] == [s.layout.to_json() for s in b]
    assert [s.layout.to_json() for s in a] != [s.layout.to_json() for s in structures(40, 4)]
    assert [s.family for s in a[:8]] == list(FAMILIES)
    cell = load_cell_variant()
    for s in a:
        lay = s.layout
        assert lay.order is not None and sorted(lay.order) == sorted(lay.ids)
        size = np.array([[float(v) for v in cell.part_types[t].size] for t in lay.types])
        lo, hi = lay.pos - size / 2, lay.pos + size / 2
        for i in range(len(lay)):
            for j in range(i + 1, len(lay)):
                inter = np.minimum(hi[i], hi[j]) - np.maximum(lo[i], lo[j])
                assert not np.all(inter > 1e-6), (s.family, s.index, lay.ids[i], lay.ids[j])
        # bottom-up: a part is never placed before a part whose top is below its bottom
        # and whose footprint it overlaps (its support)
        for i in range(len(lay)):
            for j in range(len(lay)):
                over = np.all(np.minimum(hi[i, :2], hi[j, :2]) - np.maximum(lo[i, :2],
                                                                            lo[j, :2]) > 0)
                if over and abs(hi[j, 2] - lo[i, 2]) < 1e-9:
                    assert lay.order.index(lay.ids[j]) < lay.order.index(lay.ids[i])


def test_a_knife_edge_is_dropped_as_noise():
    """A cube 0.1 mm inside its support's edge stands still at settle's 960 Hz (moving
    0.05 mm, like a solid structure) and falls with the seeded 0.2 mm offsets reversed:
    the noise test tries structures that barely move too, and both signs, so it is
    dropped, not counted as a stander."""
    from cellspec.layout import layout_from_obj

    cell = load_cell_variant()
    lay = layout_from_obj({"parts": [
        {"id": "a", "type": "cube", "pos": [0.40, 0.20, 0.025]},
        {"id": "b", "type": "cube", "pos": [0.4249, 0.20, 0.075]}], "order": ["a", "b"]},
        "<knife>")
    noise = ag.Noise(0.00014, 0.29, ())
    assert ag.st.settle(cell, lay).verdict == "stand"
    verdicts = [ag.st.settle(cell, ag.perturbed(lay, 0, 0, s)).verdict for s in (1, -1)]
    assert verdicts == ["stand", "fall"]
    lab = ag.label(cell, lay, noise, seed=0, index=0)
    assert lab.perturbed and lab.drop == "verdict changes under a 0.2 mm perturbation"
    assert ag.label(cell, lay, noise, seed=0, index=0, perturb=False).drop is None

"""CI guard of issue 22's physics agreement: on seeded structures of the shape families
(a rotated roof, a yawed stack, cylinders on blocks), ``check`` with the station's rules
passes nothing that falls in the pybullet settle oracle (bench/physics_shapes.py runs 300)."""

from __future__ import annotations

import pytest
from structure_families import SHAPE_FAMILIES, load_cell_variant, structures

from cellspec.robots import agreement as ag
from cellspec.solver.verify import check

N = 30  # 10 per family
SEED = 2026


@pytest.fixture(scope="module")
def labelled():
    """Settle labels (with the noise filter) and check verdicts of the shape structures."""
    cell = load_cell_variant(shapes=True)
    noise = ag.measure_noise(cell)
    rows = []
    for s in structures(N, SEED, list(SHAPE_FAMILIES)):
        lab = ag.label(cell, s.layout, noise, seed=SEED, index=s.index)
        rows.append((s, lab, check(cell, s.layout)))
    return rows


def test_shape_structures_have_both_outcomes(labelled):
    kept = [(s, lab) for s, lab, _ in labelled if lab.drop is None]
    assert {s.family for s, _ in kept} == set(SHAPE_FAMILIES)
    assert 0.1 * len(kept) <= sum(lab.fall for _, lab in kept) <= 0.9 * len(kept)


def test_no_false_pass_on_shapes(labelled, record_property):
    kept = [(s, lab, v) for s, lab, v in labelled if lab.drop is None]
    conf = ag.confusion([(s.family, lab.fall, v.verdict) for s, lab, v in kept])
    record_property("confusion", conf["all"])
    bad = [f"{s.family} #{s.index} ({s.note}): {lab.message}" for s, lab, v in kept
           if ag.outcome(lab.fall, v.verdict) == "false_pass"]
    assert not bad, "\n".join(bad)
    assert conf["all"]["unknown"] == 0  # check decides every shape structure

"""Design runs once (issue 15 item 4): the phases hand on one typed Layout and its verdict,
so a command checks, sequences and converts each layout at most once; and the one
``Layout.resolve(cell)`` that fills in part sizes from the part types."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import cellspec
import cellspec.layout
import cellspec.solver.cpsat.sequence
import cellspec.solver.verify
from cellspec.agent.loop import Gated, conformance, gate, reference, run_design
from cellspec.agent.offline import OfflineAdapter
from cellspec.agent.orchestrator import Reviewer, run_orchestrated
from cellspec.core.errors import CellspecError
from cellspec.layout import UnknownPartType, layout_from_obj

ROOT = Path(__file__).resolve().parents[1]
CELL = str(ROOT / "rules" / "cells" / "dual_arm_station.cell")
TOWER = "build a 3-cube tower at x 0.4 y 0.2"
COUNTED = {"checks": (cellspec.solver.verify, "check"),
           "sequencings": (cellspec.solver.cpsat.sequence, "plan"),
           "conversions": (cellspec.layout, "layout_from_obj")}


@pytest.fixture(scope="module")
def cell():
    return cellspec.load_cell(CELL)


@pytest.fixture
def counts(monkeypatch):
    """Calls of check, plan and layout_from_obj, wherever a cellspec module bound them."""
    n = dict.fromkeys(COUNTED, 0)
    for key, (mod, name) in COUNTED.items():
        orig = getattr(mod, name)

        def counted(*a, _key=key, _orig=orig, **kw):
            n[_key] += 1
            return _orig(*a, **kw)
        for m in list(sys.modules.values()):
            if getattr(m, "__name__", "").startswith("cellspec") and \
                    getattr(m, name, None) is orig:
                monkeypatch.setattr(m, name, counted)
    return n


def test_a_generated_tower_is_checked_sequenced_and_converted_once(cell, counts):
    # a spec no other test builds (the solver's build is cached per spec)
    o = run_orchestrated("build a 3-cube tower at x 0.43 y 0.21", cell, OfflineAdapter())
    assert o.result.outcome == "generated"
    assert [(p.phase, p.status) for p in o.phases] == [
        ("Plan", "ok"), ("Design", "ok"), ("Inspect", "ok"), ("PreExecute", "ok"),
        ("Done", "ok")]
    assert counts == {"checks": 1, "sequencings": 1, "conversions": 1}
    # the one check was of the ordered layout that leaves, and it passes
    v = cellspec.check(cell, layout_from_obj(o.result.layout))
    assert v.verdict == "pass" and o.result.plan["order"] == o.result.layout["order"]


def test_a_cached_spec_is_not_solved_again(cell, counts):
    run_orchestrated(TOWER, cell, OfflineAdapter())
    before = dict(counts)
    o = run_orchestrated(TOWER, cell, OfflineAdapter())
    assert o.result.outcome == "generated"
    assert {k: counts[k] - before[k] for k in counts} == {
        "checks": 0, "sequencings": 0, "conversions": 0}


def test_a_reviewer_edit_is_checked_once_and_sequenced_once(cell, tmp_path, counts):
    run_orchestrated(TOWER, cell, OfflineAdapter())  # the solver's build, cached
    path = tmp_path / "review.json"
    answers = ["m\n", "EDIT", "a\n"]

    class Terminal(io.StringIO):
        def readline(self, *a):
            x = answers.pop(0) if answers else ""
            if x == "EDIT":
                obj = json.loads(path.read_text())
                for p in obj["parts"]:
                    p["pos"][0] += 0.004  # inside the 5 mm of `at` (issue 27)
                path.write_text(json.dumps(obj))
                return "\n"
            return x
    before = dict(counts)
    o = run_orchestrated(TOWER, cell, OfflineAdapter(),
                         reviewer=Reviewer(Terminal(), io.StringIO(), path))
    assert o.result.reason == "modified by the reviewer"
    assert [p.phase for p in o.phases] == ["Plan", "Design", "Inspect", "HumanReview",
                                           "Inspect", "HumanReview", "PreExecute", "Done"]
    # the edit: read once, checked once (Inspect), sequenced once with the sequencer's
    # re-verification as the gate's check (PreExecute); the Design layout: nothing
    assert {k: counts[k] - before[k] for k in counts} == {
        "checks": 2, "sequencings": 1, "conversions": 1}
    assert [p["pos"][0] for p in o.result.layout["parts"]] == pytest.approx([0.404] * 3)


def test_the_gate_uses_the_sequencers_verdict(cell, counts):
    lay = layout_from_obj({"parts": [{"id": f"c{k}", "type": "cube",
                                      "pos": [0.4, 0.2, 0.025 + 0.05 * k]} for k in range(3)]})
    spec = cellspec.agent.base.parse_spec(
        "design t { tower(n=3) at (0.40, 0.20) }")
    g, why = gate(cell, lay, spec, 3, 10.0)
    assert why is None and isinstance(g, Gated)
    assert g.layout.order == ("c0", "c1", "c2") and g.verdict.verdict == "pass"
    assert [s.part for s in g.steps] == ["c0", "c1", "c2"]
    assert counts["checks"] == 1 and counts["sequencings"] == 1
    # a gated layout handed back in is not solved again
    again, _ = gate(cell, lay, spec, 3, 10.0, prior=g)
    assert again is g and counts["checks"] == 1 and counts["sequencings"] == 1
    # but the spec's conformance is always re-tested
    bad, why = gate(cell, lay, spec, 4, 10.0, prior=g)
    assert bad is None and why == "safety gate: the spec needs 4 parts, the layout has 3"


def test_a_floating_cube_fails_the_gate_with_the_rule_named(cell):
    lay = layout_from_obj({"parts": [{"id": "c0", "type": "cube", "pos": [0.4, 0.2, 0.025]},
                                     {"id": "c1", "type": "cube", "pos": [0.4, 0.2, 0.2]}]})
    spec = cellspec.agent.base.parse_spec(
        "design t { tower(n=2) at (0.40, 0.20) }")
    g, why = gate(cell, lay, spec, 2, 10.0)
    assert g is None
    assert why == ("safety gate: the layout fails the check: gravity(c1): c1 rests on "
                   "nothing: its bottom is 0.125 m above the nearest support (c0)")


def test_run_design_alone_gives_the_gated_layout(cell):
    r = run_design(TOWER, cell, OfflineAdapter())
    assert r.outcome == "generated" and r.final is not None
    assert r.layout == r.final.layout.to_json() and r.plan == r.final.plan_json()
    assert list(r.final.layout.order) == r.plan["order"]
    ref = reference(cell, cellspec.agent.base.parse_spec(r.spec), 10.0)
    assert ref.parts == 3 and ref.layout is not None and ref.layout.order is not None


def test_conformance_uses_the_resolved_height(cell):
    spec = cellspec.agent.base.parse_spec(
        "design t { tower(n=2) at (0.40, 0.20) [max height 0.08] }")
    lay = layout_from_obj({"parts": [
        {"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025]},
        {"id": "b", "type": "cube", "pos": [0.4, 0.2, 0.06], "size": [0.05, 0.05, 0.02]}]})
    assert conformance(cell, lay, spec, 2) == []
    tall = layout_from_obj({"parts": [
        {"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025]},
        {"id": "b", "type": "cube", "pos": [0.4, 0.2, 0.075]}]})
    assert conformance(cell, tall, spec, 2) == [
        ("spec_max_height", ("b",), "b reaches 0.1000 m, above max height 0.08")]


# --- Layout.resolve ---------------------------------------------------------------------
def test_resolve_fills_type_sizes_and_keeps_own_sizes(cell):
    lay = layout_from_obj({"parts": [
        {"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025]},
        {"id": "b", "type": "cube", "pos": [0.5, 0.2, 0.05], "size": [0.1, 0.04, 0.1]}]})
    cube = [float(v) for v in cell.part_types["cube"].size]
    size = lay.resolve(cell)
    assert size.tolist() == [cube, [0.1, 0.04, 0.1]]
    assert np.isnan(lay.size[0]).all()  # the layout itself is unchanged
    size[0, 0] = 9.0  # a new array each call
    assert lay.resolve(cell)[0].tolist() == cube


def test_resolve_names_the_first_part_without_a_size(cell):
    lay = layout_from_obj({"parts": [
        {"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025]},
        {"id": "b", "type": "widget", "pos": [0.5, 0.2, 0.05], "size": [0.1, 0.1, 0.1]},
        {"id": "c", "type": "blob", "pos": [0.6, 0.2, 0.05]}]}, "lay.json")
    with pytest.raises(UnknownPartType) as e:
        lay.resolve(cell)
    assert (e.value.row, e.value.part, e.value.type) == (2, "c", "blob")
    assert isinstance(e.value, CellspecError)
    assert str(e.value.diagnostics[0]).startswith("lay.json")
    assert "parts[2].type: unknown part type 'blob' (the cell defines: " in str(e.value)

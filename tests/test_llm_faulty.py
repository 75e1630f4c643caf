"""Property test: whatever the faulty adapter proposes, every layout `design` returns
re-verifies with clingo (and has the spec's part count), and every rejection says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cellspec
from cellspec.agent.faulty import FAULTS, FaultyAdapter
from cellspec.agent.loop import run_design
from cellspec.agent.openai_adapter import ChatAdapter
from cellspec.agent.orchestrator import run_orchestrated
from cellspec.layout import layout_from_obj

ROOT = Path(__file__).resolve().parents[1]
CELL = cellspec.load_cell(str(ROOT / "rules" / "cells" / "dual_arm_station.cell"))
COMMANDS = {
    "build a 3-cube tower at x 0.4 y 0.2": 3,
    "a 2-cube tower next to a wall 2 wide": 6,
    "a pyramid with base 3": 6,
    "a tower of four cubes no higher than 3 cubes": None,  # cannot be built: rejected
    "build a spaceship": None,  # cannot be translated: rejected
}


def check_design(command, faults, seed, t_max):
    """One faulty-adapter command through the orchestrator (what `cellspec design` runs)."""
    r = run_orchestrated(command, CELL, FaultyAdapter(faults, seed), t_max=t_max).result
    if r.layout is None:
        assert r.outcome == "rejected" and r.reason
        assert r.reason.startswith(("cannot translate", "cannot build")), r.reason
        assert COMMANDS[command] is None
        return
    assert r.outcome in ("accepted", "repaired", "generated")
    assert len(r.layout["parts"]) == COMMANDS[command]
    v = cellspec.check(CELL, layout_from_obj(r.layout), backend="clingo")
    assert v.verdict == "pass", v.violations
    assert r.plan["order"] == r.layout["order"]
    assert r.calls <= 1 + t_max


ARGS = {"command": st.sampled_from(sorted(COMMANDS)),
        "faults": st.lists(st.sampled_from(FAULTS), min_size=1, max_size=4),
        "seed": st.integers(0, 10_000), "t_max": st.integers(1, 3)}
HC = [HealthCheck.too_slow]


@settings(max_examples=200, derandomize=True, deadline=None, suppress_health_check=HC)
@given(**ARGS)
def test_every_design_output_reverifies(command, faults, seed, t_max):
    check_design(command, faults, seed, t_max)


@pytest.mark.slow
@settings(max_examples=1000, derandomize=True, deadline=None, suppress_health_check=HC,
          database=None)
@given(**ARGS)
def test_every_design_output_reverifies_1000(command, faults, seed, t_max):
    """The issue's >= 1000 faulty proposals (slow: ~1 min)."""
    check_design(command, faults, seed, t_max)


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_is_caught(fault):
    r = run_design("build a 3-cube tower at x 0.4 y 0.2", CELL, FaultyAdapter([fault]), t_max=1)
    assert r.layout is not None
    # overlap, out_of_workspace: the repaired layout passes the rules but no longer stands
    # at (0.4, 0.2): it breaks intent and the solver builds from the spec (issue 27)
    expect = {"none": "accepted", "floating": "repaired"}.get(fault, "generated")
    assert r.outcome == expect
    if expect == "generated":  # the unusable proposal is named
        assert r.reason


class _Scripted(ChatAdapter):
    """Proposes the given layouts in turn (a stand-in model)."""

    def __init__(self, spec_text, answers):
        super().__init__("scripted")
        self.spec_text, self.answers = spec_text, list(answers)
        self.propose_mode = "always"

    def translate(self, command, cell, feedback=None):
        return self.spec_text

    def _complete(self, kind, messages, schema, tools=None):
        return {"content": json.dumps(self.answers.pop(0)), "finish_reason": "stop"}


def _parts(*zs, t="cube"):
    return {"parts": [{"id": f"p{k}", "type": t, "pos": [0.4, 0.2, z]} for k, z in
                      enumerate(zs)], "order": None}


@pytest.mark.parametrize(("answer", "why"), [
    (_parts(0.025, 0.075, t="sphere"), "unknown part type"),
    (_parts(0.025, 0.085), "above max height 0.1"),
    (_parts(0.025), "needs 2 parts"),
    ({"parts": [{"id": "a", "type": "cube", "pos": [0.4, 0.2]}], "order": None}, "malformed"),
])
def test_spec_conformance_before_the_check(answer, why):
    spec = "design d {\n    tower(n=2) at (0.4, 0.2)\n    max height 0.1\n}\n"
    r = run_design("x", CELL, _Scripted(spec, [answer]), t_max=1)
    assert r.outcome == "generated" and why in r.reason
    assert max(p["pos"][2] for p in r.layout["parts"]) <= 0.075

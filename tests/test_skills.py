"""The skill registry: strict tool schemas from pydantic, dispatch results, bad arguments as
error results, and the recovery skills shift/flatten on real layouts (re-verified)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cellspec
from cellspec.layout import layout_from_obj
from cellspec.llm_adapters.skills import SkillRegistry

ROOT = Path(__file__).resolve().parents[1]
CELL = str(ROOT / "rules" / "cells" / "dual_arm_station.cell")
NAMES = ("verify", "verify_workspace", "verify_no_overlap", "verify_gravity",
         "verify_grip_access", "sequence", "task", "spec", "shift", "flatten")


def part(i, x, y, z):
    return {"id": i, "type": "cube", "pos": [x, y, z]}


TOWER = {"parts": [part("a", 0.4, 0.2, 0.025), part("b", 0.4, 0.2, 0.075),
                   part("c", 0.4, 0.2, 0.125)], "order": None}


@pytest.fixture(scope="module")
def reg():
    return SkillRegistry(cellspec.load_cell(CELL))


def verify_independently(reg, layout):
    obj = {"units": "m", "parts": layout["parts"]}
    return cellspec.check(reg.cell, layout_from_obj(obj)).verdict


def test_tool_schemas_are_strict(reg):
    tools = reg.tools()
    assert tuple(t["function"]["name"] for t in tools) == NAMES == reg.names
    for t in tools:
        assert t["type"] == "function" and t["function"]["strict"] is True
        params = t["function"]["parameters"]

        def walk(node):
            if isinstance(node, dict):
                assert "default" not in node and "title" not in node
                if node.get("type") == "object" and "properties" in node:
                    assert node["additionalProperties"] is False
                    assert node["required"] == list(node["properties"])
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)
        walk(params)
    shift = next(t for t in tools if t["function"]["name"] == "shift")["function"]
    props = shift["parameters"]["properties"]
    assert shift["parameters"]["required"] == ["layout", "dx", "dy", "avoid"]
    assert {"type": "null"} in props["dx"]["anyOf"]  # nullable, not optional


def test_verify_and_granular(reg):
    assert reg.dispatch("verify", {"layout": TOWER})["verdict"] == "pass"
    floating = {"parts": [part("a", 0.4, 0.2, 0.025), part("b", 0.4, 0.2, 0.1)]}
    r = reg.dispatch("verify", {"layout": floating})
    assert r["ok"] and r["verdict"] == "fail"
    assert [v["rule"] for v in r["violations"]] == ["gravity"]
    g = reg.dispatch("verify_gravity", {"layout": floating})
    assert g["rule"] == "gravity" and g["verdict"] == "fail"
    assert g["violations"][0]["parts"] == ["b"]
    assert reg.dispatch("verify_no_overlap", {"layout": floating})["verdict"] == "pass"
    out = {"parts": [part("a", 0.9, 0.2, 0.025)]}
    w = reg.dispatch("verify_workspace", {"layout": out})
    assert w["verdict"] == "fail" and w["violations"][0]["parts"] == ["a"]
    ga = reg.dispatch("verify_grip_access", {"layout": TOWER})
    assert ga["verdict"] == "unknown" and "needs the placement order" in ga["reason"]
    ordered = dict(TOWER, order=["a", "b", "c"])
    assert reg.dispatch("verify_grip_access", {"layout": ordered})["verdict"] == "pass"


def test_sequence_task_spec(reg):
    s = reg.dispatch("sequence", {"layout": TOWER})
    assert s["ok"] and s["order"] == ["a", "b", "c"]
    t = reg.dispatch("task", {"layout": TOWER})
    assert [x["part"] for x in t["tasks"]] == ["a", "b", "c"]
    assert all(x["robot"] == "irb1600" and x["gripper"] == "parallel" for x in t["tasks"])
    sp = reg.dispatch("spec", {"command": "a 2-cube tower at x 0.4 y 0.2"})
    assert sp["spec"] == "design command {\n    tower(n=2) at (0.4, 0.2)\n}\n"
    bad = reg.dispatch("spec", {"command": "build a spaceship"})
    assert not bad["ok"] and "did not understand 'spaceship'" in bad["error"]


@pytest.mark.parametrize(("name", "args", "error"), [
    ("nope", {}, "unknown skill 'nope'"),
    ("verify", "{not json", "the arguments are not JSON"),
    ("verify", [1, 2], "must be a JSON object"),
    ("verify", {}, "layout: Field required"),
    ("verify", {"layout": TOWER, "extra": 1}, "extra: Extra inputs are not permitted"),
    ("verify", {"layout": {"parts": [{"id": "a", "type": "cube", "pos": ["x"]}]}},
     "layout.parts.0.pos.0"),
    ("verify", {"layout": {"parts": [part("a", 0.4, 0.2, 0.025), part("a", 0.5, 0.2, 0.025)]}},
     "duplicate"),
    ("verify", {"layout": {"parts": [{"id": "a", "type": "cube", "pos": [1, 2]}]}}, "pos"),
    ("shift", {"layout": TOWER, "dx": 0.1}, "give both dx and dy"),
    ("shift", {"layout": TOWER, "avoid": {"x": [0.5, 0.4], "y": [0, 1]}}, "avoid.x"),
    ("flatten", {"layout": TOWER, "max_layers": 0}, "max_layers must be at least 1"),
    ("task", {"layout": {"parts": [part("a", 0.4, 0.2, 0.2)]}}, "does not verify (gravity(a))"),
])
def test_bad_arguments_give_error_results(reg, name, args, error):
    r = reg.dispatch(name, args)
    assert r["ok"] is False and error in r["error"], r
    json.dumps(r)


def test_shift_by_offset_and_to_clear_a_blocked_region(reg):
    r = reg.dispatch("shift", {"layout": TOWER, "dx": 0.05, "dy": -0.05})
    assert [p["pos"] for p in r["layout"]["parts"]] == [[0.45, 0.15, 0.025],
                                                        [0.45, 0.15, 0.075],
                                                        [0.45, 0.15, 0.125]]
    assert r["verdict"] == "pass"
    avoid = {"x": [0.35, 0.45], "y": [0.15, 0.25], "z": None}
    r = reg.dispatch("shift", {"layout": TOWER, "avoid": avoid})
    assert r["ok"] and r["verdict"] == "pass" and (r["dx"], r["dy"]) == (-0.075, 0.0)
    for p in r["layout"]["parts"]:  # clear of the blocked region
        assert p["pos"][0] + 0.025 <= 0.35 + 1e-9
    assert verify_independently(reg, r["layout"]) == "pass"
    # out of the workspace: the nearest offset that brings it back
    r = reg.dispatch("shift", {"layout": {"parts": [part("a", 0.71, 0.2, 0.025)]}})
    assert (r["dx"], r["dy"]) == (-0.035, 0.0) and r["verdict"] == "pass"


def test_flatten_lowers_the_layout(reg):
    r = reg.dispatch("flatten", {"layout": TOWER, "max_layers": 1})
    assert r["moved"] == ["b", "c"] and r["verdict"] == "pass"
    assert all(p["pos"][2] == 0.025 for p in r["layout"]["parts"])
    assert verify_independently(reg, r["layout"]) == "pass"
    r2 = reg.dispatch("flatten", {"layout": TOWER, "max_layers": 2})
    assert r2["moved"] == ["c"] and max(p["pos"][2] for p in r2["layout"]["parts"]) == 0.075
    assert reg.dispatch("flatten", {"layout": TOWER, "max_layers": 3})["moved"] == []
    assert reg.dispatch("flatten", {"layout": TOWER, "max_layers": 1}) == r  # deterministic

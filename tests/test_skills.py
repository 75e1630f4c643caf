"""The skill registry: strict tool schemas from pydantic, dispatch results, bad arguments as
error results, and the recovery skills shift/flatten on real layouts (re-verified)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cellspec
from cellspec.agent.skills import SkillRegistry
from cellspec.layout import layout_from_obj

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


def test_task_robot_without_reach(tmp_path):
    """A robot with no `reach` (and no URDF) has no reach limit, as in the planner: it
    takes the parts its gripper fits (the skill raised a TypeError before)."""
    text = Path(CELL).read_text().replace(" reach 1.2 ", " ")
    assert " reach 1.2 " not in text
    (tmp_path / "noreach.cell").write_text(text)
    r = SkillRegistry(cellspec.load_cell(str(tmp_path / "noreach.cell")))
    t = r.dispatch("task", {"layout": TOWER})
    assert t["ok"], t
    assert all(x["robot"] == "irb1600" for x in t["tasks"])


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


NAN, INF = float("nan"), float("inf")
BIG = {"parts": [part(f"p{i}", 0.1, 0.1, 0.025) for i in range(1001)]}


@pytest.mark.parametrize(("name", "args", "error"), [
    # names of the wrong type
    (None, {}, "unknown skill 'None'"),
    (5, {}, "unknown skill '5'"),
    # arguments of the wrong type (strict: no "0.4" for 0.4, no true for 1)
    ("verify", None, "must be a JSON object"),
    ("verify", 7, "must be a JSON object"),
    ("verify", b"\xff\xfe", "the arguments are not JSON"),
    ("verify", "[" * 100_000, "the arguments are not JSON: nested too deeply"),
    ("verify", {"layout": {"parts": [{"id": "a", "type": "cube", "pos": ["0.4", "0.2",
                                                                           "0.025"]}]}},
     "layout.parts.0.pos.0: Input should be a valid number"),
    ("verify", {"layout": {"parts": [{"id": "a", "type": "cube", "pos": [True, 0.2, 0.025]}]}},
     "layout.parts.0.pos.0: Input should be a valid number"),
    ("verify", {"layout": {"parts": [{"id": 1, "type": "cube", "pos": [0.4, 0.2, 0.025]}]}},
     "layout.parts.0.id: Input should be a valid string"),
    ("flatten", {"layout": TOWER, "max_layers": True}, "max_layers: Input should be a valid "
                                                      "integer"),
    ("flatten", {"layout": TOWER, "max_layers": 1.5}, "max_layers: Input should be a valid "
                                                     "integer"),
    ("spec", {"command": 5}, "command: Input should be a valid string"),
    # NaN and huge numbers
    ("verify", {"layout": {"parts": [part("a", NAN, 0.2, 0.025)]}},
     "parts[0].pos[0]: must be a finite number"),
    ("verify", '{"layout": {"parts": [{"id": "a", "type": "cube", "pos": [NaN, 0.2, 0.1]}]}}',
     "parts[0].pos[0]: must be a finite number"),
    ("verify", {"layout": {"parts": [part("a", 1e308, 0.2, 0.025)]}}, "1e+308 m is absurd"),
    ("verify", {"layout": {"parts": [{"id": "a", "type": "cube", "pos": [10**400, 0, 0]}]}},
     "layout.parts.0.pos.0: Input should be a valid number"),
    ("shift", {"layout": TOWER, "dx": NAN, "dy": 0.0}, "dx and dy must be finite"),
    ("shift", {"layout": TOWER, "dx": 1e308, "dy": 1e308}, "dx and dy must be at most 1000 m"),
    ("shift", {"layout": TOWER, "dx": 999.9, "dy": 0.0}, "1000.3 m is absurd"),
    ("shift", {"layout": TOWER, "avoid": {"x": [NAN, 1.0], "y": [0.0, 1.0]}},
     "avoid.x must be [lo, hi]: two finite numbers"),
    ("shift", {"layout": TOWER, "avoid": {"x": [0.0, INF], "y": [0.0, 1.0]}},
     "avoid.x must be [lo, hi]: two finite numbers"),
    ("shift", {"layout": TOWER, "avoid": {"x": [0.0, 1.0], "y": [0.0]}}, "avoid.y must be"),
    ("flatten", {"layout": TOWER, "clearance": NAN}, "clearance must be a non-negative"),
    ("flatten", {"layout": TOWER, "clearance": 1e308}, "no free table spot for b"),
    # missing and extra fields
    ("shift", {"dx": 0.1, "dy": 0.1}, "layout: Field required"),
    ("verify", {"layout": {"parts": [{"id": "a", "type": "cube"}]}},
     "layout.parts.0.pos: Field required"),
    ("verify", {"layout": {"parts": [dict(part("a", 0.4, 0.2, 0.025), mass=1)]}},
     "layout.parts.0.mass: Extra inputs are not permitted"),
    ("verify_workspace", {"layout": TOWER, "order": None}, "order: Extra inputs"),
    # empty, huge, duplicate ids, unknown types and order entries
    ("task", {"layout": {"parts": []}}, "task: layout: the layout has no parts"),
    ("shift", {"layout": {"parts": []}}, "shift: layout: the layout has no parts"),
    ("flatten", {"layout": {"parts": []}}, "flatten: layout: the layout has no parts"),
    ("verify", {"layout": BIG}, "layout: 1001 parts; a skill takes at most 1000"),
    ("flatten", {"layout": BIG}, "layout: 1001 parts; a skill takes at most 1000"),
    ("sequence", {"layout": {"parts": [part("a", 0.4, 0.2, 0.025),
                                        part("a", 0.5, 0.2, 0.025)]}},
     "parts[1].id: duplicate id 'a' (first at parts[0])"),
    ("shift", {"layout": {"parts": [part("a", 0.4, 0.2, 0.025, ), part("a", 0.5, 0.2, 0.025)]}},
     "parts[1].id: duplicate id 'a'"),
    ("flatten", {"layout": {"parts": [dict(part("a", 0.4, 0.2, 0.025), type="blob")]}},
     "unknown part type 'blob'"),
    ("verify", {"layout": {"parts": [part("a", 0.4, 0.2, 0.025)], "order": ["a", "a"]}},
     "order[1]: 'a' is listed twice"),
    ("spec", {"command": "build a tower " * 1000}, "the command is 14000 characters long"),
])
def test_hostile_arguments_give_clear_error_results(reg, name, args, error):
    """Every hostile input is an error result that names the field, never an exception."""
    r = reg.dispatch(name, args)
    assert r["ok"] is False and error in r["error"], r
    assert "internal" not in r
    json.dumps(r, allow_nan=False)


def test_empty_layout_verifies_and_sequences_trivially(reg):
    r = reg.dispatch("verify", {"layout": {"parts": []}})
    assert r["ok"] and r["verdict"] == "pass"
    s = reg.dispatch("sequence", {"layout": {"parts": []}})
    assert s["ok"] and s["order"] is None


def test_a_skill_defect_is_an_internal_error_result(reg, monkeypatch):
    """The last guard: an unexpected exception in a skill is a result marked internal."""
    def boom(a):
        raise ZeroDivisionError("division by zero")
    monkeypatch.setitem(reg.skills, "verify", dataclasses.replace(reg.skills["verify"],
                                                                 fn=boom))
    r = reg.dispatch("verify", {"layout": TOWER})
    assert r == {"ok": False, "internal": True, "error": "verify: internal error (please "
                 "report): ZeroDivisionError: division by zero"}


_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                     st.text(max_size=8))
_json = st.recursive(_scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=8), kids, max_size=4)),
    max_leaves=12)
_num = st.one_of(st.floats(), st.integers(), st.sampled_from([0.4, 0.2, 0.025, 0.075]),
                 _scalars)
_coord = st.sampled_from([0.3, 0.4, 0.5, 0.2, 0.025, 0.075, 0.125, 0.69, -0.1, 1e-9])
_part = st.fixed_dictionaries({"id": st.one_of(st.sampled_from(["a", "b", "c"]), _scalars),
                               "type": st.sampled_from(["cube", "cube", "blob"]),
                               "pos": st.one_of(st.lists(_coord, min_size=3, max_size=3),
                                                st.lists(_num, min_size=0, max_size=4),
                                                _scalars)})
_layout = st.fixed_dictionaries({"parts": st.lists(_part, max_size=4)},
                                optional={"order": st.one_of(
                                    st.none(), st.lists(st.sampled_from(["a", "b", "c"]),
                                                        max_size=3))})
_clean = st.fixed_dictionaries({"parts": st.lists(st.fixed_dictionaries({
    "id": st.sampled_from(["a", "b", "c", "d"]), "type": st.just("cube"),
    "pos": st.lists(_coord, min_size=3, max_size=3)}), max_size=4)})
_args = st.one_of(
    _json,
    st.fixed_dictionaries({"layout": _layout}),
    st.fixed_dictionaries({"layout": _clean}),
    st.fixed_dictionaries({"layout": _clean, "dx": st.one_of(st.none(), st.floats()),
                           "dy": st.one_of(st.none(), st.floats()),
                           "avoid": st.one_of(st.none(), st.fixed_dictionaries({
                               "x": st.lists(_coord, min_size=2, max_size=2),
                               "y": st.lists(_coord, min_size=2, max_size=2),
                               "z": st.none()}))}),
    st.fixed_dictionaries({"layout": _clean, "max_layers": st.one_of(st.none(), st.integers()),
                           "clearance": st.one_of(st.none(), st.floats())}),
    st.fixed_dictionaries({"layout": _layout}, optional={
        "dx": _num, "dy": _num, "max_layers": _num, "clearance": _num, "command": _scalars,
        "avoid": st.one_of(_json, st.fixed_dictionaries({"x": st.lists(_num, max_size=3),
                                                         "y": st.lists(_num, max_size=3)}))}),
)


@settings(max_examples=200, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from((*NAMES, "nope", "")), args=_args,
       as_text=st.booleans())
def test_dispatch_never_raises(reg, name, args, as_text):
    """For arbitrary JSON arguments (as an object or as text), dispatch returns a JSON
    result: ok true, or ok false with an error that names the skill; never an exception
    and never an internal error."""
    if as_text:
        try:
            args = json.dumps(args)
        except ValueError:
            pass
    r = reg.dispatch(name, args)
    assert isinstance(r, dict) and isinstance(r["ok"], bool)
    assert "internal" not in r, r
    if not r["ok"]:
        assert isinstance(r["error"], str) and r["error"]
        if name in NAMES:
            assert r["error"].startswith(f"{name}: ")
    json.dumps(r, allow_nan=False)


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


def test_long_violation_lists_are_cut_with_a_total(reg):
    """12 cubes in one spot: 66 overlapping pairs; a result lists 50 and gives the total."""
    heap = {"parts": [part(f"p{i}", 0.4, 0.2, 0.025) for i in range(12)]}
    r = reg.dispatch("verify", {"layout": heap})
    full = cellspec.check(reg.cell, layout_from_obj(dict(heap, units="m")))
    assert len(full.violations) == 66 and r["violations_total"] == 66
    assert len(r["violations"]) == 50 and r["violations"][0]["rule"] == "no_overlap"
    small = reg.dispatch("verify", {"layout": {"parts": [part("a", 0.4, 0.2, 0.1)]}})
    assert "violations_total" not in small


def test_shift_search_stops_at_the_time_limit(reg, monkeypatch):
    """A floating cube fails at every offset: shift tries 12 offsets, or (the clock past the
    time limit after the first) only the nearest one."""
    from cellspec.agent import skills

    floating = {"parts": [part("a", 0.4, 0.2, 0.2)]}
    r = reg.dispatch("shift", {"layout": floating})
    assert r["ok"] and r["verdict"] == "fail" and (r["dx"], r["dy"]) != (0.0, 0.0)
    clock = iter(range(0, 10_000, 100))
    monkeypatch.setattr(skills, "perf_counter", lambda: float(next(clock)))
    r = reg.dispatch("shift", {"layout": floating})
    assert r["ok"] and r["verdict"] == "fail" and (r["dx"], r["dy"]) == (0.0, 0.0)

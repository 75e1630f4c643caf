"""Every verb's JSON output validates against its schema shipped in cellspec/schemas (and
names it in "format"); every bundled layout validates against the layout schema, and the
schema and cellspec's own reader agree on what a layout is."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from conftest import LAYOUTS, REPO, STATION, run_cellspec
from referencing import Registry, Resource

from cellspec.layout import layout_from_obj
from cellspec.schemas import NAMES, schema

BROKEN = REPO / "rules" / "examples" / "tower3_broken.json"
TOWER = REPO / "rules" / "examples" / "tower3.json"
INCONSISTENT = REPO / "rules" / "examples" / "inconsistent.cell"

REGISTRY = Registry().with_resources(
    (schema(n)["$id"], Resource.from_contents(schema(n))) for n in NAMES)


def validate(name: str, obj) -> None:
    s = schema(name)
    jsonschema.Draft202012Validator.check_schema(s)
    jsonschema.Draft202012Validator(s, registry=REGISTRY).validate(obj)


def _json(*args: str | Path, code: int | tuple[int, ...]) -> dict:
    r = run_cellspec(*args, "--format", "json")
    assert r.returncode in ((code,) if isinstance(code, int) else code), r.stderr
    return json.loads(r.stdout)


def test_schemas_are_valid_and_shipped():
    for n in NAMES:
        s = schema(n)
        jsonschema.Draft202012Validator.check_schema(s)
        assert s["title"] == f"cellspec.{n}/1"
    with pytest.raises(ValueError, match="no schema 'nope'"):
        schema("nope")


@pytest.mark.parametrize("args, code", [
    ((STATION, TOWER), 0),
    ((STATION, BROKEN), 1),
    ((STATION, LAYOUTS / "wall_9.json", "--robust", "0.002"), 1),
    ((STATION, TOWER, "--backend", "z3"), 2),  # z3 refuses the stability rules: unknown
    ((STATION, LAYOUTS / "wall_9.json", "--time-limit", "0.001"), 2),  # stopped: unknown
])
def test_check_json_is_a_verdict(args, code):
    out = _json("check", *args, code=code)
    assert out["format"] == "cellspec.verdict/1"
    validate("verdict", out)
    assert out["verdict"] == {0: "pass", 1: "fail", 2: "unknown"}[code] or "robust" in out


@pytest.mark.parametrize("layout, code", [(TOWER, 0), (BROKEN, 0)])
def test_plan_json(layout, code):
    out = _json("plan", STATION, layout, code=code)
    assert out["format"] == "cellspec.plan/1"
    validate("plan", out)


def test_plan_json_unknown():
    out = _json("plan", STATION, TOWER, "--time-limit", "0.001", code=2)
    assert out["status"] == "unknown"
    validate("plan", out)


@pytest.mark.parametrize("layout, extra, code", [
    (BROKEN, (), 0), (TOWER, (), 0), (BROKEN, ("--time-limit", "0.001"), 2),
    (BROKEN, ("--block", "x < 0.7"), 1),  # everything blocked: proved impossible
])
def test_repair_json(layout, extra, code):
    out = _json("repair", STATION, layout, *extra, code=code)
    assert out["format"] == "cellspec.repair/1"
    validate("repair", out)
    if "layout" in out:  # the repaired layout is a layout, and cellspec reads it back
        validate("layout", out["layout"])
        layout_from_obj(out["layout"])


@pytest.mark.parametrize("command, extra, code", [
    ("build a 3-cube tower at x 0.4 y 0.2", (), 0),
    ("put it over there", (), 1),
    ("build a 3-cube tower at x 0.4 y 0.2", ("--time-limit", "0.001"), 2),
])
def test_design_json(command, extra, code):
    out = _json("design", command, "--cell", STATION, *extra, code=code)
    assert out["format"] == "cellspec.design/1"
    validate("design", out)
    if out["layout"] is not None:
        layout_from_obj(out["layout"])


PREF_CELL = """
import physical
cell prefcell {
    units m
    workspace x [0, 0.3] y [0, 0.2] z [0, 0.05]
    surface table z 0
    part cube size (0.04, 0.04, 0.04)
}
rule low_x "{p} is far from x = 0" severity preference weight 3 : forall p: p.x <= 0.03
rule high_y "{p} is low on y" severity preference weight 2 : forall p: p.y >= 0.15
design two {
    tower(n=1)
    tower(n=1)
}
design too_tall {
    tower(n=3)
}
"""
DESIGNS = REPO / "rules" / "scenarios" / "designs.cell"


@pytest.mark.parametrize("args, code", [
    ((STATION, DESIGNS, "--design", "tower3"), 0),
    ((STATION, DESIGNS, "--design", "tower3", "--max-memory", "64M"), 2),  # unknown: memory
])
def test_generate_json_without_preferences(args, code):
    out = _json("generate", *args, code=code)
    validate("generate", out)
    assert "preferences" not in out and out["format"] == "cellspec.generate/1"
    if code == 0:
        assert out["verdict"] == "pass"
        validate("layout", out["layout"])
        layout_from_obj(out["layout"])
    else:
        assert out["status"] == "unknown" and "layout" not in out


@pytest.mark.parametrize("design, extra, code", [
    ("two", (), 0), ("two", ("--prove-preferences", "0.02"), 0), ("too_tall", (), 1)])
def test_generate_json_with_preferences(tmp_path, design, extra, code):
    p = tmp_path / "c.cell"
    p.write_text(PREF_CELL, encoding="utf-8")
    out = _json("generate", p, p, "--design", design, *extra, code=code)
    validate("generate", out)
    if code == 1:
        assert out["status"] == "infeasible" and "layout" not in out
        return
    prefs = out["preferences"]
    assert (prefs["met"], prefs["total"], prefs["optimal"]) == (8, 10, True)
    if extra:
        assert (prefs["bound"]["status"], prefs["bound"]["met"]) == ("optimal", 8)
    broken = dict(out, preferences={k: v for k, v in prefs.items() if k != "optimal"})
    with pytest.raises(jsonschema.ValidationError, match="optimal"):
        validate("generate", broken)


def test_design_json_with_preferences_and_bound(tmp_path):
    p = tmp_path / "c.cell"
    p.write_text(PREF_CELL.split("design two")[0], encoding="utf-8")
    out = _json("design", "build a tower of 1 cube and a tower of 1 cube", "--cell", p,
                "--prove-preferences", "0.02", code=0)
    validate("design", out)
    prefs = out["preferences"]
    assert (prefs["met"], prefs["optimal"], prefs["bound"]["status"]) == (8, True, "optimal")
    broken = dict(out, preferences=dict(prefs, bound={"status": "optimal", "step_m": 0.02,
                                                      "positions": 1, "total": 10}))
    with pytest.raises(jsonschema.ValidationError, match="violated"):
        validate("design", broken)


@pytest.mark.parametrize("args, code", [
    ((INCONSISTENT,), 1),
    ((STATION, "--parts", "cube=3"), (0, 1)),
    ((STATION, INCONSISTENT), 1),
    ((STATION, "--time-limit", "0.001"), 2),
])
def test_lint_json_is_an_object(args, code):
    out = _json("lint", *args, code=code)
    assert out["format"] == "cellspec.lint/1" and isinstance(out["reports"], list)
    validate("lint", out)


def _bundled_layouts() -> list[Path]:
    files = sorted((REPO / "rules").rglob("*.json"))
    return [f for f in files if "parts" in json.loads(f.read_text())]


def test_every_bundled_layout_validates():
    files = _bundled_layouts()
    assert len(files) >= 10
    for f in files:
        validate("layout", json.loads(f.read_text()))


BAD = [
    {"parts": [{"id": "c1", "type": "cube"}]},  # no pos
    {"parts": [{"id": "1c", "type": "cube", "pos": [0, 0, 0]}]},  # id pattern
    {"parts": [{"id": "c1", "type": "cube", "pos": [0, 0]}]},  # pos of 2
    {"parts": [{"id": "c1", "type": "cube", "pos": [0, 0, 0], "colour": "red"}]},
    {"parts": [], "units": "cm"},
    {"parts": [], "format": "cellspec.layout/2"},
    {"parts": [{"id": "c1", "type": "cube", "pos": [0, 0, 0], "gripper": "magnet"}]},
]
GOOD = [
    {"parts": []},
    {"format": "cellspec.layout/1", "units": "mm",
     "parts": [{"id": "c1", "type": "cube", "pos": [400, 200, 25], "yaw": 30,
                "size": [50, 50, 50], "gripper": "vacuum"}], "order": ["c1"]},
]


@pytest.mark.parametrize("obj", BAD + GOOD)
def test_schema_and_reader_agree(obj):
    """What the layout schema refuses, cellspec refuses (exit 2); what it accepts, reads."""
    from cellspec.core.errors import CellspecError

    try:
        validate("layout", obj)
        schema_ok = True
    except jsonschema.ValidationError:
        schema_ok = False
    try:
        layout_from_obj(obj)
        reader_ok = True
    except CellspecError:
        reader_ok = False
    assert schema_ok == reader_ok == (obj in GOOD)

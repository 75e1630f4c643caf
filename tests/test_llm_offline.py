"""The offline translator (exact spec text), cannot-translate messages, and `cellspec design`
with the offline adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cellspec
from cellspec.agent.base import TranslateError, parse_spec
from cellspec.agent.loop import run_design
from cellspec.agent.offline import OfflineAdapter
from cellspec.cli import main

ROOT = Path(__file__).resolve().parents[1]
CELL = str(ROOT / "rules" / "cells" / "dual_arm_station.cell")


@pytest.fixture(scope="module")
def cell():
    return cellspec.load_cell(CELL)


def spec(*lines: str) -> str:
    return "design command {\n" + "".join(f"    {x}\n" for x in lines) + "}\n"


# printed with every spec whose command used a side word (front/back/left/right)
SIDES = ("// sides: front = low y (y 0.05), back = high y (y 0.5), left = low x (x 0.2), "
         "right = high x (x 0.7)")


CASES = [
    ("build a 3-cube tower at x 0.4 y 0.2", spec("tower(n=3) at (0.4, 0.2)")),
    ("Build a tower of four cubes at (0.45, 0.25).", spec("tower(n=4) at (0.45, 0.25)")),
    ("build a tower 2 high", spec("tower(n=2)")),
    ("build a wall three wide two high along y", spec("wall(width=3, height=2, along=y)")),
    ("a wall with a width of 4 and a height of 1", spec("wall(width=4, height=1)")),
    ("a pyramid with a base of 4", spec("pyramid(base=4)")),
    ("pyramid with base 3 along y", spec("pyramid(base=3, along=y)")),
    ("a staircase of five steps", spec("staircase(steps=5)")),
    ("build a 3-step staircase in the corner",
     spec("// assumed: 'the corner' = the front left corner",
          "staircase(steps=3) near (0.2, 0.05) [inside x [0.2, 0.45] y [0.05, 0.275]]")),
    ("a bridge with a span of two", spec("bridge(span=2)")),
    ("an arch with a span of 1", spec("arch(span=1)")),
    ("build a canopy", spec("canopy()")),
    ("an enclosure 4 by 3 2 high", spec("enclosure(w=4, d=3, h=2)")),
    ("a dense block 3x2x2", spec("block(w=3, d=2, h=2)")),
    ("pack 12 cubes in x 0.3 to 0.5 y 0.1 to 0.3",
     spec("packing(n=12, region x [0.3, 0.5] y [0.1, 0.3])")),
    ("pack six cubes", spec("packing(n=6, region x [0.2, 0.7] y [0.05, 0.5])")),
    ("a tower in the back right corner", spec(SIDES, "tower() near (0.7, 0.5)"
                                                     " [inside x [0.45, 0.7] y [0.275, 0.5]]")),
    ("build a tower no higher than 0.1 m",
     spec("// assumed: a tower with no count = the tallest tower under max height 0.1: 2 parts",
          "tower(n=2)", "max height 0.1")),
    ("a 2-cube tower no higher than 20 cm", spec("tower(n=2)", "max height 0.2")),
    ("a tower of four cubes next to a wall 3 wide",
     spec("tower(n=4) at (0.525, 0.275)", "wall(width=3) at (0.375, 0.275)")),
    ("a 2-cube tower left of a pyramid with base 3 at x 0.5 y 0.3",
     spec("tower(n=2) at (0.35, 0.3)", "pyramid(base=3) at (0.5, 0.3)")),
    ("a tower right of a wall 2 wide at x 0.4 y 0.2",
     spec("tower() at (0.525, 0.2)", "wall(width=2) at (0.4, 0.2)")),
    ("a tower behind a wall 3 wide at x 0.4 y 0.2",
     spec("tower() at (0.4, 0.3)", "wall(width=3) at (0.4, 0.2)")),
    ("a tower in front of a wall 3 wide at x 0.4 y 0.2",
     spec("tower() at (0.4, 0.1)", "wall(width=3) at (0.4, 0.2)")),
    ("build a 3 cube tower and a wall 2 wide 2 high",
     spec("tower(n=3)", "wall(width=2, height=2)")),
    # operator phrasing: verbs, size words without numbers (the kind's defaults), synonyms
    ("stack four cubes into a tower at x 0.45 y 0.25", spec("tower(n=4) at (0.45, 0.25)")),
    # a size word with no size is used visibly (issue 27: no word dropped silently)
    ("make me a small wall",
     spec("// assumed: 'small' gives no size: the sizes said (or the defaults) are used",
          "wall()")),
    ("a little staircase please",
     spec("// assumed: 'little' gives no size: the sizes said (or the defaults) are used",
          "staircase()")),
    ("stack some blocks into stairs", spec("staircase()")),
    ("build a closed pen 3 by 3 two cubes high", spec("enclosure(w=3, d=3, h=2)")),
    ("an enclosure 4 by 3 with walls 2 high", spec("enclosure(w=4, d=3, h=2)")),
    # placement by named places of the workspace
    ("build an arch somewhere in the middle",
     spec("arch() near (0.45, 0.275) [inside x [0.325, 0.575] y [0.1625, 0.3875]]")),
    ("a tower in the centre of the table", spec("tower() near (0.45, 0.275)"
                                                " [inside x [0.325, 0.575] y [0.1625, 0.3875]]")),
    ("put up a wall along the back edge", spec(SIDES, "wall(along=x) near (0.45, 0.5)"
                                                      " [inside x [0.2, 0.7] y [0.275, 0.5]]")),
    ("a wall along the left edge", spec(SIDES, "wall(along=y) near (0.2, 0.275)"
                                               " [inside x [0.2, 0.45] y [0.05, 0.5]]")),
    ("a tower along the front edge", spec(SIDES, "tower() near (0.45, 0.05)"
                                                 " [inside x [0.2, 0.7] y [0.05, 0.275]]")),
    # packing regions and layers
    ("put 15 cubes into the left half of the table",
     spec(SIDES, "packing(n=15, region x [0.2, 0.45] y [0.05, 0.5])")),
    ("store 12 cubes in the back right area",
     spec(SIDES, "packing(n=12, region x [0.45, 0.7] y [0.275, 0.5])")),
    ("pack 6 cubes in the front half",
     spec(SIDES, "packing(n=6, region x [0.2, 0.7] y [0.05, 0.275])")),
    ("pack eleven cubes in one layer",
     spec("packing(n=11, region x [0.2, 0.7] y [0.05, 0.5])", "max height 0.05")),
    # issue 18: the way a cell engineer types
    ("stack three cubes on top of each other", spec("tower(n=3)")),
    ("a row of six cubes", spec("wall(width=6, height=1)")),
    ("a wall 6 long and 3 high", spec("wall(width=6, height=3)")),
    ("build a 5 by 4 platform", spec("block(w=5, d=4, h=1)")),
    ("a pyramid 3 wide", spec("pyramid(base=3)")),
    ("a tower in the left half", spec(SIDES, "tower() near (0.325, 0.275)"
                                             " [inside x [0.2, 0.45] y [0.05, 0.5]]")),
    ("Twenty-one cubes, packed anywhere", spec("packing(n=21, region x [0.2, 0.7] y [0.05, "
                                              "0.5])")),
    ("a dozen cubes in x 0.2 to 0.5 y 0.1 to 0.4",
     spec("packing(n=12, region x [0.2, 0.5] y [0.1, 0.4])")),
    ("two parallel walls 4 long, 0.1 m apart",
     spec("wall(width=4) at (0.45, 0.35)", "wall(width=4) at (0.45, 0.2)", "apart 0.1")),
    ("a solid 2 by 3 by 2 in the corner near x 0.6 y 0.45",
     spec("block(w=2, d=3, h=2) near (0.7, 0.5) [inside x [0.45, 0.7] y [0.275, 0.5]]")),
    ("a table-top on four pillars two cubes tall", spec("canopy(height=2)")),
    ("a symmetric pyramid of 3 levels", spec("pyramid(base=3) [symmetric]")),
]


@pytest.mark.parametrize(("command", "expected"), CASES)
def test_translate_exact(cell, command, expected):
    text = OfflineAdapter().translate(command, cell)
    assert text == expected
    parse_spec(text)  # the DSL accepts it
    assert OfflineAdapter().translate(command, cell) == text  # deterministic


@pytest.mark.parametrize(("command", "words"), [
    ("build a spaceship", "did not understand 'spaceship'"),
    ("build a tower very quickly", "did not understand 'very' (column 15), 'quickly'"),
    ("a tower along the diagonal", "did not understand 'diagonal' (column 19)"),
    ("build a 3-cube tower next to the wall", "did not understand 'the wall'"),
    ("a tower wall", "'wall' (column 9) and 'tower' in one structure"),
    ("build a big enclosure", "'big' gives no size"),
    ("put a few cubes in a stack over there", "'over there' names no place in the cell"),
    ("put 5 cubes here", "'here' names no place in the cell"),
    ("use all the cubes to build whatever fits", "'all the cubes': the cell gives no stock"),
    ("a box of cubes 3 by 3 by 2", "is ambiguous: a dense block or a hollow enclosure?"),
    ("a box of cubes", "a 'box' needs its sizes"),
    ("a walled square 3 by 4", "a walled square needs equal sides"),
    ("a tower 2 high tightly", "only a packing can be packed tightly"),
    ("pack 12 cubes at x 0.4 y 0.2", "a packing is placed by its region"),
    ("a tower 5 high no higher than 2 cubes", "contradictory request"),
    ("pack -3 cubes", "a count or size is a positive number"),
    ("pack 1e9 cubes", "too large (at most 1000)"),
    ("a plattform 5 by 4", "did you mean 'platform'?; understood: 5 by 4"),
    ("", None),
])
def test_cannot_translate(cell, command, words):
    with pytest.raises(TranslateError) as ei:
        OfflineAdapter().translate(command, cell)
    msg = str(ei.value)
    assert "cannot translate" in msg
    if words:
        assert words in msg


A = "// assumed: "
DEFAULTS = [
    ("make a short tower, no higher than 2 cubes",
     spec(A + "'short' gives no size: the sizes said (or the defaults) are used",
          A + "a tower with no count = the tallest tower under max height 0.1: 2 parts",
          "tower(n=2)", "max height 0.1")),
    ("build something tall but not higher than 15 cm",
     spec(A + "'something tall' = the tallest tower under max height 0.15: 3 parts",
          "tower(n=3)", "max height 0.15")),
    ("build something tall",
     spec(A + "'something tall' = the tallest tower under the workspace height: 6 parts",
          "tower(n=6)")),
    ("build a tower of a few cubes at x 0.4 y 0.2",
     spec(A + "'a few' = 3", "tower(n=3) at (0.4, 0.2)")),
    ("pack ten cubes as tightly as possible",
     spec(A + "'as tightly as possible' = minimize footprint",
          "packing(n=10, region x [0.2, 0.7] y [0.05, 0.5], minimize footprint)")),
    ("fill the front strip with cubes",
     spec(A + "'fill the front strip' = the strip one part deep along the front edge, one "
          "layer, with the most parts the solver places there: 8",
          "packing(n=8, region x [0.2, 0.7] y [0.05, 0.1])", "max height 0.05")),
    ("arrange 7 cubes however you like",
     spec(A + "'however you like' = the solver's choice: a packing on the workspace floor",
          "packing(n=7, region x [0.2, 0.7] y [0.05, 0.5])")),
    ("build a box of cubes 3 by 2 by 2",
     spec(A + "'box 3 by 2 by 2' = dense block (every cube is on the rim, so solid and "
          "hollow are the same)", "block(w=3, d=2, h=2)")),
    ("a walled square 3 by 3 with nothing inside",
     spec(A + "'walled square' = enclosure one course high", "enclosure(w=3, d=3, h=1)")),
    ("a walled square 3 by 3 2 high", spec("enclosure(w=3, d=3, h=2)")),
    ("build a big enclosure 5 by 3 with walls two cubes high",
     spec(A + "'big': the sizes given are used", "enclosure(w=5, d=3, h=2)")),
]


@pytest.mark.parametrize(("command", "text"), DEFAULTS)
def test_documented_defaults_are_visible(cell, command, text):
    assert OfflineAdapter().translate(command, cell) == text
    parse_spec(text)  # the comment is part of valid DSL


def test_fill_builds_the_announced_count(cell):
    r = run_design("fill the front strip with cubes", cell, OfflineAdapter())
    assert r.outcome == "generated" and len(r.layout["parts"]) == 8
    assert all(0.05 - 1e-9 <= p["pos"][1] - 0.025 and p["pos"][1] + 0.025 <= 0.1 + 1e-9
               for p in r.layout["parts"])


def test_offline_proposes_nothing(cell):
    assert OfflineAdapter().propose(parse_spec(spec("tower(n=2)")), cell, None) is None


def test_loop_generates_and_verifies(cell):
    from cellspec.layout import layout_from_obj

    r = run_design("build a 3-cube tower at x 0.4 y 0.2", cell, OfflineAdapter())
    assert r.outcome == "generated" and r.reason is None and r.calls == 0
    assert [p["pos"] for p in r.layout["parts"]] == [[0.4, 0.2, 0.025], [0.4, 0.2, 0.075],
                                                     [0.4, 0.2, 0.125]]
    assert r.plan["order"] == r.layout["order"]
    assert cellspec.check(cell, layout_from_obj(r.layout)).verdict == "pass"


def test_loop_rejects_unbuildable(cell):
    r = run_design("a tower of 9 cubes", cell, OfflineAdapter())
    assert r.outcome == "rejected" and r.layout is None
    assert "cannot build" in r.reason and "workspace top" in r.reason


def test_cli_design_json(tmp_path, capsys):
    out = tmp_path / "l.json"
    rc = main(["design", "build a 3-cube tower at x 0.4 y 0.2", "--cell", CELL, "-o", str(out),
               "--format", "json"])
    obj = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert list(obj) == ["spec", "outcome", "reason", "layout", "plan", "calls", "seconds",
                         "intent", "intent_of", "phases"]
    assert obj["intent_of"] == "layout" and all(c["holds"] for c in obj["intent"])
    assert {c["kind"] for c in obj["intent"]} >= {"count", "levels", "at", "type"}
    assert [p["phase"] for p in obj["phases"]] == ["Plan", "Design", "Inspect", "PreExecute",
                                                   "Done"]
    assert obj["outcome"] == "generated" and obj["calls"] == 0
    assert obj["spec"] == spec("tower(n=3) at (0.4, 0.2)")
    assert json.loads(out.read_text()) == obj["layout"]
    assert [g["part"] for g in obj["plan"]["grips"]] == obj["plan"]["order"]


def test_cli_design_pretty_and_exit_codes(capsys):
    assert main(["design", "a dense block 3x2x2", "--cell", CELL]) == 0
    text = capsys.readouterr().out
    assert "block(w=3, d=2, h=2)" in text and "outcome: generated" in text
    assert "re-verified pass" in text
    assert main(["design", "build a spaceship", "--cell", CELL]) == 1
    assert "did not understand 'spaceship'" in capsys.readouterr().out
    assert main(["design", "a tower", "--cell", CELL, "--adapter", "replay"]) == 2
    assert main(["design", "a tower", "--cell", CELL, "--max-calls", "0"]) == 2
    with pytest.raises(SystemExit) as ei:
        main(["design", "a tower"])
    assert ei.value.code == 2

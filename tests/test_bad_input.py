"""Hostile and broken input: every problem is exit code 2 with a message naming the file
(and line:col where the parser knows it), never a Python traceback; solver limits give
``unknown``, never ``pass``."""

from __future__ import annotations

import json
import re
import time

import pytest
from conftest import LAYOUTS, STATION, run_cellspec

import cellspec
from cellspec import CellspecError
from cellspec.layout import layout_from_obj, load_layout

GOOD_LAYOUT = LAYOUTS / "wall_9.json"

CELL_HEAD = """\
import physical
cell c {
    workspace x [0, 1] y [0, 1] z [0, 1]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
}
"""  # 6 lines: the first rule below is on line 7


def assert_input_error(res, *needles: str) -> None:
    """Exit 2, no traceback, every needle in stderr."""
    assert "Traceback" not in res.stderr + res.stdout, res.stderr
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    for n in needles:
        assert n in res.stderr, f"{n!r} not in stderr:\n{res.stderr}"
    assert "internal error" not in res.stderr


# --- rule files -------------------------------------------------------------------------

RULE_FILE_CASES = {
    # name: (text after CELL_HEAD, [needles]); {f} is the file name
    "syntax_error": ('rule r "m" : forall p: p.x <\n', ["{f}:8:1:", "syntax error"]),
    "missing_colon": ('rule r "m" forall p: p.x < 1\n', ["{f}:7:12:", "syntax error"]),
    "unknown_relation": ('rule r "m" : forall p: touches(p, p)\n',
                         ["{f}:7:24:", "unknown relation 'touches'"]),
    "unknown_variable": ('rule r "m" : forall p: q.x < 1\n', ["{f}:7:24:", "unknown variable 'q'"]),
    "unknown_attribute": ('rule r "m" : forall p: p.colour < 1\n', ["{f}:7:24:", "colour"]),
    "duplicate_rule": ('rule a "m" : forall p: p.x < 1\nrule a "m" : forall p: p.x < 2\n',
                       ["{f}:8:1:", "rule 'a' is already defined at {f}:7:1"]),
    "duplicate_of_stdlib": ('rule no_overlap "m" : forall p: p.x < 1\n',
                            ["{f}:7:1:", "already defined", "physical.cell"]),
    "unknown_part_type_in_test": ("test t {\n    layout { a widget at (0.5, 0.5, 0.025) }\n"
                                  "    expect pass\n}\n", ["{f}:8:14:", "unknown part type"]),
    "unknown_domain": ('rule r "m" : forall p in widget: p.x < 1\n', ["{f}:7:", "widget"]),
    "bad_message_placeholder": ('rule r "{q} bad" : forall p: p.x < 1\n', ["{f}:7:1:", "{{q}}"]),
    "juxtaposed_numbers": ('rule r "m" : forall p: p.x < 0.3 0.2\n', ["{f}:7:", "syntax error"]),
    "juxtaposed_conditions": ('rule r "m" : forall p: grounded(p) grounded(p)\n',
                              ["{f}:7:", "syntax error"]),
    "nonlinear": ('rule r "m" : forall p, q: p.x * q.x < 1\n', ["{f}:7:", "constant factor"]),
}


@pytest.mark.parametrize("case", sorted(RULE_FILE_CASES))
def test_broken_rule_file_cli(tmp_path, case):
    text, needles = RULE_FILE_CASES[case]
    f = tmp_path / f"{case}.cell"
    f.write_text(CELL_HEAD + text)
    res = run_cellspec("check", f.name, GOOD_LAYOUT, cwd=tmp_path)
    assert_input_error(res, *(n.format(f=f.name) for n in needles))


@pytest.mark.parametrize("case", sorted(RULE_FILE_CASES))
def test_broken_rule_file_api(tmp_path, case):
    text, _ = RULE_FILE_CASES[case]
    f = tmp_path / f"{case}.cell"
    f.write_text(CELL_HEAD + text)
    with pytest.raises(CellspecError) as exc:
        cellspec.load_cell(str(f))
    d = exc.value.diagnostics[0]
    assert d.file.endswith(f.name) and d.line >= 7 and d.col >= 1


def test_several_broken_statements_all_reported(tmp_path):
    f = tmp_path / "multi.cell"
    f.write_text(CELL_HEAD
                 + 'rule r1 "m" : forall p: p.x <\n'  # 7 (error found at 8:1)
                 + 'rule r2 "m" : forall p p.x < 1\n'  # 8
                 + 'rule ok "m" : forall p: p.x < 1\n'  # 9
                 + 'rule r3 "m" forall p: p.x < 1\n')  # 10
    res = run_cellspec("check", f.name, GOOD_LAYOUT, cwd=tmp_path)
    assert_input_error(res, "multi.cell:8:1:", "multi.cell:8:24:", "multi.cell:10:13:")
    assert res.stderr.count("syntax error") == 3


def test_several_semantic_errors_all_reported(tmp_path):
    f = tmp_path / "sem.cell"
    f.write_text(CELL_HEAD + 'rule r1 "m" : forall p: touches(p, p)\n'
                 'rule r2 "m" : forall p: q.x < 1\n'
                 'rule r3 "m" : forall p: p.x < 1\nrule r3 "m" : forall p: p.x < 1\n')
    res = run_cellspec("check", f.name, GOOD_LAYOUT, cwd=tmp_path)
    assert_input_error(res, "sem.cell:7:25:", "sem.cell:8:25:", "sem.cell:10:1:")


def test_unknown_part_type_in_test_via_test_verb(tmp_path):
    f = tmp_path / "t.cell"
    f.write_text(CELL_HEAD + "test t {\n    layout { a widget at (0.5, 0.5, 0.025) }\n"
                 "    expect pass\n}\n")
    res = run_cellspec("test", f.name, cwd=tmp_path)
    assert_input_error(res, "t.cell:8:", "unknown part type 'widget'")


def test_bad_import_path(tmp_path):
    f = tmp_path / "imp.cell"
    f.write_text('import "nope/missing.cell"\n' + CELL_HEAD)
    res = run_cellspec("check", f.name, GOOD_LAYOUT, cwd=tmp_path)
    assert_input_error(res, "imp.cell:1:1:", "not found", "missing.cell")


def test_unknown_standard_library(tmp_path):
    f = tmp_path / "imp.cell"
    f.write_text(CELL_HEAD.replace("import physical", "import physics"))
    res = run_cellspec("check", f.name, GOOD_LAYOUT, cwd=tmp_path)
    assert_input_error(res, "imp.cell:1:1:", "physics")


def test_import_cycle(tmp_path):
    (tmp_path / "a.cell").write_text('import "b.cell"\n' + CELL_HEAD)
    (tmp_path / "b.cell").write_text('import "a.cell"\nrule r "m" : forall p: p.x < 1\n')
    res = run_cellspec("check", "a.cell", GOOD_LAYOUT, cwd=tmp_path)
    assert_input_error(res, "b.cell:1:1:", "import cycle", "a.cell -> b.cell -> a.cell")


def test_self_import(tmp_path):
    (tmp_path / "a.cell").write_text('import "a.cell"\n' + CELL_HEAD)
    res = run_cellspec("check", "a.cell", GOOD_LAYOUT, cwd=tmp_path)
    assert_input_error(res, "a.cell:1:1:", "import cycle")


@pytest.mark.parametrize(("name", "content", "needles"), [
    ("empty.cell", b"", ["empty.cell:1:1:", "empty"]),
    ("blank.cell", b"  \n\n  \t\n", ["blank.cell:1:1:", "empty"]),
    ("binary.cell", bytes(range(256)) * 4, ["binary.cell", "UTF-8"]),
    ("nul.cell", b"\x00\x01\x02garbage", ["nul.cell:1:1:", "syntax error"]),
])
def test_unreadable_rule_files(tmp_path, name, content, needles):
    (tmp_path / name).write_bytes(content)
    res = run_cellspec("check", name, GOOD_LAYOUT, cwd=tmp_path)
    assert_input_error(res, *needles)


@pytest.mark.parametrize("verb", ["check", "test"])
def test_comment_only_rule_file(tmp_path, verb):
    (tmp_path / "c.cell").write_text("// nothing here\n/* nor here */\n")
    args = ["c.cell", GOOD_LAYOUT] if verb == "check" else ["c.cell"]
    res = run_cellspec(verb, *args, cwd=tmp_path)
    if verb == "test":  # a file with nothing to run may pass, but never crash
        assert res.returncode in (0, 2) and "internal error" not in res.stderr
    else:
        assert_input_error(res, "c.cell")


def test_rule_file_is_a_directory(tmp_path):
    (tmp_path / "dir.cell").mkdir()
    res = run_cellspec("check", "dir.cell", GOOD_LAYOUT, cwd=tmp_path)
    assert_input_error(res, "dir.cell", "directory")
    with pytest.raises(CellspecError):
        cellspec.load_cell(str(tmp_path / "dir.cell"))


def test_rule_file_missing(tmp_path):
    res = run_cellspec("check", "nope.cell", GOOD_LAYOUT, cwd=tmp_path)
    assert_input_error(res, "nope.cell")


def test_fmt_and_test_verbs_on_broken_files(tmp_path):
    f = tmp_path / "syn.cell"
    f.write_text(CELL_HEAD + 'rule r "m" : forall p: p.x <\n')
    before = f.read_text()
    res = run_cellspec("fmt", f.name, cwd=tmp_path)
    assert_input_error(res, "syn.cell", "8:1")
    assert f.read_text() == before, "fmt must not touch a file it cannot parse"
    res = run_cellspec("fmt", "--check", f.name, cwd=tmp_path)
    assert_input_error(res, "syn.cell")
    res = run_cellspec("test", f.name, cwd=tmp_path)
    assert_input_error(res, "syn.cell:8:1:")
    (tmp_path / "bin.cell").write_bytes(b"\xff\xfe\x00garbage")
    assert_input_error(run_cellspec("fmt", "bin.cell", cwd=tmp_path), "bin.cell")
    assert_input_error(run_cellspec("test", "nope", cwd=tmp_path), "nope")


# --- layouts ------------------------------------------------------------------------------

def _part(**kw) -> dict:
    p = {"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025]}
    p.update(kw)
    return p


LAYOUT_CASES = {
    # name: (JSON text, [needles]); the file name is always required too
    "nan": ('{"parts": [{"id": "a", "type": "cube", "pos": [NaN, 0.2, 0.025]}]}', ["NaN"]),
    "infinity": ('{"parts": [{"id": "a", "type": "cube", "pos": [Infinity, 0.2, 0.025]}]}',
                 ["Infinity"]),
    "minus_infinity": ('{"parts": [{"id": "a", "type": "cube", "pos": [0.2, -Infinity, 0]}]}',
                       ["Infinity"]),
    "overflow": ('{"parts": [{"id": "a", "type": "cube", "pos": [1e309, 0.2, 0.025]}]}',
                 ["parts[0].pos[0]", "finite"]),
    "huge": ('{"parts": [{"id": "a", "type": "cube", "pos": [1e308, 0.2, 0.025]}]}',
             ["parts[0].pos[0]"]),
    "string_number": ('{"parts": [{"id": "a", "type": "cube", "pos": ["abc", 0.2, 0.025]}]}',
                      ["parts[0].pos[0]"]),
    "missing_type": (json.dumps({"parts": [{"id": "a", "pos": [0.4, 0.2, 0.025]}]}),
                     ["parts[0].type"]),
    "missing_pos": (json.dumps({"parts": [{"id": "a", "type": "cube"}]}), ["parts[0].pos"]),
    "short_pos": (json.dumps({"parts": [_part(pos=[0.4, 0.2])]}), ["parts[0].pos"]),
    "missing_parts": ('{"units": "m"}', ["parts"]),
    "parts_null": ('{"parts": null}', ["parts"]),
    "not_an_object": ("[1, 2, 3]", ["JSON object"]),
    "extra_part_field": (json.dumps({"parts": [_part(colour="red")]}), ["parts[0].colour",
                                                                        "unknown field"]),
    "extra_top_field": (json.dumps({"parts": [_part()], "foo": 1}), ["foo", "unknown field"]),
    "bad_units": (json.dumps({"units": "km", "parts": [_part()]}), ["units"]),
    "bad_gripper": (json.dumps({"parts": [_part(gripper="suction")]}), ["parts[0].gripper"]),
    "numeric_id": (json.dumps({"parts": [_part(id=5)]}), ["parts[0].id"]),
    "bad_id": (json.dumps({"parts": [_part(id="a b")]}), ["parts[0].id"]),
    "duplicate_ids": (json.dumps({"parts": [_part(), _part(pos=[0.5, 0.2, 0.025])]}),
                      ["parts[1].id", "duplicate id 'a'"]),
    "unknown_type": (json.dumps({"parts": [_part(type="widget")]}),
                     ["parts[0].type", "widget"]),
    "order_unknown_id": (json.dumps({"parts": [_part()], "order": ["a", "zz"]}),
                         ["order[1]", "zz"]),
    "order_duplicate_id": (json.dumps({"parts": [_part(), _part(id="b")],
                                       "order": ["a", "a", "b"]}), ["order[1]", "twice"]),
    "order_missing_id": (json.dumps({"parts": [_part(), _part(id="b")], "order": ["a"]}),
                         ["order", "missing b"]),
    "order_not_a_list": (json.dumps({"parts": [_part()], "order": "a"}), ["order"]),
    "negative_size": (json.dumps({"parts": [_part(size=[-0.05, 0.05, 0.05])]}),
                      ["parts[0].size[0]"]),
    "zero_size": (json.dumps({"parts": [_part(size=[0.05, 0, 0.05])]}), ["parts[0].size[1]"]),
    "huge_size": (json.dumps({"parts": [_part(size=[0.05, 0.05, 1e6])]}), ["parts[0].size[2]"]),
    "empty": ("", [":1:1:", "empty"]),
    "blank": ("  \n\n", [":1:1:", "empty"]),
    "invalid_json": ('{"parts": [\n  {"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025]},,\n]}',
                     [":2:57:", "invalid JSON"]),
    "unterminated": ('{"parts": [\n', [":2:1:", "invalid JSON"]),
    "trailing_garbage": ('{"parts": []} x', [":1:15:", "invalid JSON"]),
    "deep_nesting": ("[" * 100_000 + "]" * 100_000, ["nested too deeply"]),
    "deep_nesting_inside": ('{"parts": ' + "[" * 5000 + "]" * 5000 + "}", ["nested"]),
    "binary": ("\udcff", ["UTF-8"]),
}

# parsed by pydantic in lax mode: "0.4" and true become 0.4 and 1.0
LAX_BUG = ("cellspec/layout.py: `Finite = Annotated[float, Field(allow_inf_nan=False, "
           "strict=False)]` coerces JSON strings and booleans to floats, so a position "
           "\"0.4\" or true (1.0 m) is accepted; expected exit 2")
LAX_CASES = {
    "numeric_string": json.dumps({"parts": [_part(pos=["0.4", 0.2, 0.025])]}),
    "boolean": json.dumps({"parts": [_part(pos=[True, 0.2, 0.025])]}),
    "string_size": json.dumps({"parts": [_part(size=["0.05", 0.05, 0.05])]}),
}


def _write_layout(tmp_path, name: str, text: str):
    f = tmp_path / f"{name}.json"
    f.write_bytes(text.encode("utf-8", "surrogateescape"))
    return f


@pytest.mark.parametrize("case", sorted(LAYOUT_CASES))
def test_broken_layout_cli(tmp_path, case):
    text, needles = LAYOUT_CASES[case]
    f = _write_layout(tmp_path, case, text)
    res = run_cellspec("check", STATION, f.name, cwd=tmp_path)
    assert_input_error(res, f.name, *needles)
    for line in res.stderr.splitlines():
        if "error" in line:
            assert line.startswith(f.name), line  # every diagnostic names the file


@pytest.mark.parametrize("case", sorted(LAYOUT_CASES))
def test_broken_layout_api(tmp_path, case, station_cell):
    text, _ = LAYOUT_CASES[case]
    f = _write_layout(tmp_path, case, text)
    with pytest.raises(CellspecError) as exc:
        cellspec.check(station_cell, load_layout(f))
    assert all(d.file.endswith(f.name) for d in exc.value.diagnostics)


@pytest.mark.parametrize("case", sorted(LAX_CASES))
def test_layout_number_types_are_strict(tmp_path, case):
    f = _write_layout(tmp_path, case, LAX_CASES[case])
    res = run_cellspec("check", STATION, f.name, cwd=tmp_path)
    assert_input_error(res, f.name)


def test_layout_errors_collected_not_just_first(tmp_path):
    obj = {"parts": [_part(colour="red"), _part(id="b", type=3), _part(id="c", pos=[0, 0])]}
    f = _write_layout(tmp_path, "many", json.dumps(obj))
    res = run_cellspec("check", STATION, f.name, cwd=tmp_path)
    assert_input_error(res, "parts[0].colour", "parts[1].type", "parts[2].pos")


def test_layout_is_a_directory(tmp_path):
    (tmp_path / "dir.json").mkdir()
    res = run_cellspec("check", STATION, "dir.json", cwd=tmp_path)
    assert_input_error(res, "dir.json", "directory")


def test_layout_missing(tmp_path):
    res = run_cellspec("check", STATION, "nope.json", cwd=tmp_path)
    assert_input_error(res, "nope.json")


def test_50mb_layout_refused_by_size(tmp_path):
    f = tmp_path / "huge.json"
    with open(f, "wb") as fh:
        fh.write(b'{"parts": [')
        fh.truncate(50 * 1024 * 1024)  # sparse: 50 MB without writing it
    t0 = time.perf_counter()
    res = run_cellspec("check", STATION, f.name, cwd=tmp_path)
    elapsed = time.perf_counter() - t0
    assert_input_error(res, "huge.json", "limit")
    assert re.search(r"\b52428800\b", res.stderr)
    assert elapsed < 10, f"refusing by size must be quick, took {elapsed:.1f} s"
    t0 = time.perf_counter()
    with pytest.raises(CellspecError, match="limit"):
        load_layout(f)
    assert time.perf_counter() - t0 < 1


def test_max_bytes_option(tmp_path):
    res = run_cellspec("check", STATION, GOOD_LAYOUT, "--max-bytes", "10", cwd=tmp_path)
    assert_input_error(res, "wall_9.json", "limit")


def test_layout_from_obj_rejects_non_finite_values():
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(CellspecError) as exc:
            layout_from_obj({"parts": [_part(pos=[bad, 0.2, 0.025])]}, "mem.json")
        assert exc.value.diagnostics[0].file == "mem.json"
        assert "parts[0].pos[0]" in str(exc.value)


# --- usage ----------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    [],
    ["frobnicate"],
    ["check"],
    ["check", str(STATION)],
    ["check", str(STATION), str(GOOD_LAYOUT), "--format", "xml"],
    ["check", str(STATION), str(GOOD_LAYOUT), "--timeout", "abc"],
    ["check", str(STATION), str(GOOD_LAYOUT), "--timeout", "0"],
    ["check", str(STATION), str(GOOD_LAYOUT), "--timeout", "-1"],
    ["check", str(STATION), str(GOOD_LAYOUT), "--timeout", "nan"],
    ["check", str(STATION), str(GOOD_LAYOUT), "--backend", "z9"],
    ["test"],
    ["test", str(STATION), "--workers", "0"],
    ["fmt"],
])
def test_usage_errors(args):
    assert_input_error(run_cellspec(*args))


# --- solver limits: unknown, never pass --------------------------------------------------

def _grid_layout(n: int) -> dict:
    """n cubes on a 5 cm grid, in several layers (valid JSON, ordered)."""
    parts = [{"id": f"c{i}", "type": "cube",
              "pos": [round(0.2 + 0.05 * (i % 100), 4), round(0.05 + 0.05 * ((i // 100) % 100),
                                                               4),
                      round(0.025 + 0.05 * (i // 10000), 4)]} for i in range(n)]
    return {"parts": parts, "order": [p["id"] for p in parts]}


@pytest.fixture(scope="module")
def big_layout(tmp_path_factory):
    f = tmp_path_factory.mktemp("big") / "big5000.json"
    f.write_text(json.dumps(_grid_layout(5000)))
    return f


def test_timeout_gives_unknown_cli(big_layout):
    res = run_cellspec("check", STATION, big_layout, "--timeout", "1e-9", "--format", "json")
    assert "Traceback" not in res.stderr
    assert res.returncode != 0
    out = json.loads(res.stdout)
    assert out["verdict"] == "unknown"
    assert out["reason"]
    assert out["violations"] == []
    res = run_cellspec("check", STATION, big_layout, "--timeout", "1e-9")
    assert res.returncode not in (0, 1)
    assert "unknown" in res.stdout and "pass" not in res.stdout.split()


def test_timeout_gives_unknown_api(big_layout, station_cell):
    v = cellspec.check(station_cell, load_layout(big_layout), timeout=1e-9)
    assert v.verdict == "unknown" and not v.ok
    assert "1e-09" in v.reason or "within" in v.reason


QUADRATIC = """\
cell c {
    workspace x [0, 10] y [0, 10] z [0, 1]
    part cube size (0.05, 0.05, 0.05)
}
rule spread "{p} and {q} are far apart" : forall p, q: p.x - q.x < 10
"""


def test_over_limit_quadratic_rule_is_unknown(tmp_path, big_layout):
    f = tmp_path / "quad.cell"
    f.write_text(QUADRATIC)
    t0 = time.perf_counter()
    res = run_cellspec("check", f, big_layout, "--format", "json")
    assert time.perf_counter() - t0 < 60
    assert "Traceback" not in res.stderr
    assert res.returncode != 0
    out = json.loads(res.stdout)
    assert out["verdict"] == "unknown"
    assert "spread" in out["reason"]
    v = cellspec.check(cellspec.load_cell(str(f)), load_layout(big_layout))
    assert v.verdict == "unknown" and "spread" in v.reason


def test_quadratic_rule_small_layout_is_decided(tmp_path):
    f = tmp_path / "quad.cell"
    f.write_text(QUADRATIC)
    lay = tmp_path / "small.json"
    lay.write_text(json.dumps(_grid_layout(50)))
    res = run_cellspec("check", f, lay, "--format", "json")
    out = json.loads(res.stdout)
    assert out["verdict"] == "pass" and res.returncode == 0

"""Hostile input to ``cellspec design``: every bad flag value, unusable file and cell that
cannot be executed is a clear message with exit 2 (before any solver work); a command that
cannot be translated is a rejection with the reason, exit 1; never a traceback or a hang."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cellspec.cli import main

ROOT = Path(__file__).resolve().parents[1]
CELL = ROOT / "rules" / "cells" / "dual_arm_station.cell"
TOWER = "build a 3-cube tower at x 0.4 y 0.2"


def design(capsys, *flags, command=TOWER, cell=CELL):
    rc = main(["design", command, "--cell", str(cell), *map(str, flags)])
    out, err = capsys.readouterr()
    return rc, out, err


def cell_without(tmp_path, *words):
    """The bundled cell with every line that starts with one of ``words`` removed."""
    lines = [x for x in CELL.read_text().splitlines()
             if not x.strip().startswith(words)]
    p = tmp_path / "cut.cell"
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize(("flags", "message"), [
    (["--max-calls", 0], "--max-calls must be at least 1"),
    (["--max-tokens", -1], "--max-tokens must be at least 1"),
    (["--t-max", 0], "--t-max must be at least 1"),
    (["--t-max", 51], "--t-max must be at most 50 (proposals per command)"),
    (["--time-limit", "nan"], "--time-limit must be a positive number of seconds, at most 3600"),
    (["--time-limit", "inf"], "--time-limit must be a positive number of seconds, at most 3600"),
    (["--time-limit", "1e308"], "--time-limit must be a positive number of seconds"),
    (["--time-limit", 0], "--time-limit must be a positive number of seconds"),
    (["--timeout", "-1"], "--timeout must be a positive number of seconds, at most 600"),
    (["--timeout", "1e308"], "--timeout must be a positive number of seconds, at most 600"),
    (["--retries", -1], "--retries must be from 0 to 10"),
    (["--retries", 1_000_000], "--retries must be from 0 to 10"),
    (["--temperature", "nan"], "--temperature must be a number from 0 to 2"),
    (["--temperature", 3], "--temperature must be a number from 0 to 2"),
    (["--tools"], "--tools and --llm-routing need a model"),
    (["--llm-routing"], "--tools and --llm-routing need a model"),
    (["--adapter", "replay"], "--adapter replay needs --cassette JSONL"),
    (["-o", "/nonexistent-dir/x.json"], "-o /nonexistent-dir/x.json: no such directory"),
    (["--record", "/nonexistent-dir/x.jsonl"], "--record /nonexistent-dir/x.jsonl: no such "
                                                "directory"),
    (["--review", "--review-file", "/nonexistent-dir/r.json"],
     "--review-file /nonexistent-dir/r.json: no such directory"),
])
def test_bad_flag_values_exit_2(capsys, flags, message):
    rc, out, err = design(capsys, *flags)
    assert rc == 2 and out == ""
    assert err.startswith(f"cellspec: error: {message}")
    assert "Traceback" not in err


def test_output_that_is_a_directory_exits_2(capsys, tmp_path):
    rc, out, err = design(capsys, "-o", tmp_path)
    assert rc == 2 and out == "" and f"-o {tmp_path}: is a directory, not a file" in err


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such cassette"),
    ("dir", "cannot read the cassette: is a directory"),
    (b"\xff\xfe\n", "cannot read the cassette: not UTF-8 text"),
    ("garbage\n", ":1: not a cassette entry"),
    ('{"hash": 1, "response": {}}\n', ":1: not a cassette entry"),
    ('{"hash": "h", "response": "text"}\n', ":1: not a cassette entry"),
    ("[" * 100_000 + "\n", ":1: not a cassette entry"),
])
def test_bad_cassettes_exit_2(capsys, tmp_path, content, message):
    path = tmp_path / "c.jsonl"
    if content == "dir":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    rc, out, err = design(capsys, "--adapter", "replay", "--cassette", path)
    assert rc == 2 and out == "" and message in err, err


@pytest.mark.parametrize(("url", "message"), [
    ("notaurl", "the LLM server URL must start with http:// or https:// (got 'notaurl')"),
    ("ftp://x", "the LLM server URL must start with http:// or https://"),
])
def test_bad_server_url_exits_2(capsys, monkeypatch, url, message):
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    rc, out, err = design(capsys, "--adapter", "openai", "--model", "m", "--base-url", url)
    assert rc == 2 and message in err


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["design", TOWER, "--cell", str(CELL), "--max-calls", "abc"])
    assert exc.value.code == 2
    assert "argument --max-calls: invalid int value: 'abc'" in capsys.readouterr().err


@pytest.mark.parametrize(("cut", "why"), [
    (("robot ", "home ", "shared zone"), "has no robots: nothing can place the parts"),
    (("supply ",), "has no supply area: add `supply NAME x [..] y [..] z [..]` (where the "
                   "robots pick parts from)"),
])
def test_execute_on_a_cell_the_twin_cannot_run_exits_2(capsys, tmp_path, cut, why):
    cell = cell_without(tmp_path, *cut)
    rc, out, err = design(capsys, "--execute", "--format", "json", cell=cell)
    assert rc == 2 and out == ""
    assert err.strip() == f"{cell}:7:1: error: --execute: cell dual_arm_station {why}"
    # without --execute the same cell designs fine (the twin is not needed)
    rc, out, _ = design(capsys, "--format", "json", cell=cell)
    assert rc == 0 and json.loads(out)["outcome"] == "generated"


@pytest.mark.parametrize(("command", "reason"), [
    ("", "cannot translate: the command is empty"),
    ("build a tower " * 1000, "cannot translate: the command is 14000 characters long; a "
                              "command is at most 2000"),
    ("\x00\x01", "cannot translate: column 1: control character U+0000"),
    ("build a 100000000000-cube tower at x 0.4 y 0.2", "'n' 100000000000 is too large "
                                                       "(at most 1000)"),
])
def test_untranslatable_commands_are_rejected_with_exit_1(capsys, command, reason):
    rc, out, err = design(capsys, "--format", "json", command=command)
    obj = json.loads(out)
    assert rc == 1 and obj["outcome"] == "rejected" and obj["layout"] is None
    assert reason in obj["reason"] and err == ""

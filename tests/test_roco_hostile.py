"""Hostile responses to `cellspec check-plan` in RoCo's mode: RoCo-style feedback (exit 1)
or a clear error (exit 2), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cellspec.cli import main
from tests.conftest import REPO

SORT = REPO / "rules" / "cells" / "sort_cubes.cell"
PTS = ", ".join(["(0.1, 0.5, 0.5)"] * 10_000)


@pytest.mark.parametrize("text, mode, reason", [
    ("Alice Bob Chad\nEXECUTE\n" + "NAME Alice ACTION WAIT\n" * 10_001, "action_only",
     "The plan has 10003 lines; at most 10000."),
    ("EXECUTE\nNAME Alice ACTION WAIT\nNAME Dave ACTION WAIT\nNAME Bob ACTION WAIT\n"
     "Chad?\n", "action_only", "Unknown robot 'Dave' in a plan line (robots: Alice, Bob, Chad). "
     "(RoCo's own parser raises KeyError here)"),
    ("EXECUTE\nNAME Alice ACTION WAIT\nNAME Alice ACTION WAIT\nNAME Bob ACTION WAIT\n"
     "NAME Chad ACTION WAIT\n", "action_only", "exactly one ACTION for each robot"),
    (f"EXECUTE\nNAME Alice ACTION WAIT PATH [{PTS}]\nNAME Bob ACTION WAIT PATH [{PTS}]\n"
     f"NAME Chad ACTION WAIT PATH [{PTS}]\n", "action_and_path", "at most 200"),
    ("EXECUTE\nNAME Alice ACTION WAIT PATH [(0.1, 0.5, 0.5\nNAME Bob ACTION WAIT PATH "
     "[(0.1, 0.5, 0.5)]\nNAME Chad ACTION WAIT PATH [(0.1, 0.5, 0.5)]\n", "action_and_path",
     "PATH has no (x,y,z) points (RoCo's own parser raises IndexError here)"),
    ("EXECUTE\nNAME Alice ACTION WAIT PATH [(nan, 0.5, 0.5)]\nNAME Bob ACTION WAIT PATH "
     "[(0.1, 0.5, 0.5)]\nNAME Chad ACTION WAIT PATH [(0.1, 0.5, 0.5)]\n", "action_and_path",
     "is not a number (RoCo's own parser raises ValueError here)"),
], ids=["10k_lines", "unknown_robot", "duplicate_robot", "10k_points", "unbalanced", "nan"])
def test_hostile_plans_get_feedback(tmp_path: Path, capsys, text: str, mode: str,
                                    reason: str) -> None:
    p = tmp_path / "plan.txt"
    p.write_text(text)
    rc = main(["check-plan", str(SORT), str(p), "--mode", mode, "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["verdict"] == "fail" and out["check"] == "parse"
    assert reason in out["failures"][0]["text"]


@pytest.mark.parametrize("data, message", [
    (b"x" * (1 << 20) + b"\n", "plan file too large (more than 1048576 bytes)"),
    (b"EXECUTE\x00\xff\xfe" * 10, "cannot read plan"),
    (b"EXECUTE\nNAME Alice ACTION WAIT\x00\n", "it is binary"),
])
def test_unreadable_plans_exit_2(tmp_path: Path, capsys, data: bytes, message: str) -> None:
    p = tmp_path / "plan.txt"
    p.write_bytes(data)
    assert main(["check-plan", str(SORT), str(p)]) == 2
    c = capsys.readouterr()
    assert message in c.err and c.out == "" and "Traceback" not in c.err


def test_bad_mode_directive_exit_2(tmp_path: Path, capsys) -> None:
    p = tmp_path / "plan.txt"
    p.write_text("# cellspec: mode telepathy\nEXECUTE\n")
    assert main(["check-plan", str(SORT), str(p)]) == 2
    assert "unknown mode 'telepathy'" in capsys.readouterr().err

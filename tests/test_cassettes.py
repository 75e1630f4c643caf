"""Real exchanges with a real model, replayed: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) on
llama-cpp-python 0.3.36, recorded with tests/data/cassettes/record.py (grammar-constrained
translation, temperature 0). What the model answered is what it answered, good or bad;
these tests pin what cellspec makes of it: the grounding rejects invented numbers and
copied examples, the offline parser takes over, refusals stay refusals, and nothing
wrong is built. A prompt change makes the replay say the cassette no longer matches."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest

from cellspec.cli import main

HERE = Path(__file__).resolve().parent / "data" / "cassettes"
sys.path.insert(0, str(HERE))
import record  # noqa: E402  (the cassettes' own list of runs)

# command -> (exit, outcome, spec body or None, calls, how it was translated)
EXPECT = {
    # the model answered `tower(n=5) at (0.3, 0.2)` (the first example's position copied):
    # the invented position is dropped, which grounds it: one call
    "stack five cubes on top of each other": (0, "generated", "tower(n=5)", 1, "model"),
    # the model answered a tower for a row twice; the offline parser has it
    "a row of 4 cubes at x 0.5 y 0.3": (0, "generated",
                                        "wall(width=4, height=1) at (0.5, 0.3)", 2, "offline"),
    # an arch for '4 steps' twice: the grounding names the staircase; offline refuses too
    "a thing that climbs in 4 steps": (1, "rejected", None, 2, "refused"),
    # translated right by the model; the intent rules refuse the position in its numbers
    "a tower of 3 at x 0.95 y 0.2": (1, "rejected", "tower(n=3) at (0.95, 0.2)", 1, "model"),
    "a wall 4 long and 2 high": (0, "generated", "wall(width=4, height=2, along=x)", 1,
                                 "model"),
    # the model built something (a tower and an arch); the lexicon refuses 'nice': no
    # repair round
    "make the table look nice": (1, "rejected", None, 1, "refused"),
    # mixed cell: the model forgot the cans (and copied a position) twice; offline has them
    "a tower of 3 cans": (0, "generated", "tower(n=3, part=can)", 2, "offline"),
    # a packing of a point region for a row of pucks, twice; offline understood it
    "a row of 4 pucks at x 0.4 y 0.3": (0, "generated",
                                        "wall(width=4, height=1, part=puck) at (0.4, 0.3)", 2,
                                        "offline"),
}
FAST = ("stack five cubes on top of each other", "make the table look nice")  # in every run
RUNS = [(name, cell, cmd, extra) for name, runs in record.TAPES.items()
        for _, cell, cmd, extra in runs if cmd in EXPECT]
PARAMS = [pytest.param(*r, id=r[2], marks=() if r[2] in FAST else pytest.mark.slow)
          for r in RUNS]


def replay(name: str, cell: str, command: str, extra: list[str], model: str = record.MODEL
           ) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["design", command, "--cell", cell, "--adapter", "replay", "--cassette",
                   str(HERE / name), "--model", model, "--format", "json", *extra])
    return rc, json.loads(out.getvalue()) if out.getvalue().strip() else {}, err.getvalue()


@pytest.mark.parametrize(("name", "cell", "command", "extra"), PARAMS)
def test_the_real_model_replayed(name, cell, command, extra):
    rc, out, _ = replay(name, cell, command, extra)
    want_rc, outcome, body, calls, how = EXPECT[command]
    assert (rc, out["outcome"], out["calls"]) == (want_rc, outcome, calls)
    if body is None:
        assert out["spec"] is None and out["reason"].startswith("cannot translate: the "
                                                               "model's answer: ")
        assert "the offline parser: cannot translate" in out["reason"]
    else:
        assert out["spec"] == "design command {\n    " + body + "\n}\n"
    llm = out["llm"]
    assert llm["translate_format"] == "grammar (GBNF)" and llm["translate"] == "model"
    if how == "model":
        assert llm["notes"][-1] == "translated by the model (grammar)"
        assert not llm["fallbacks"]
    elif how == "offline":
        assert [f["offline"] for f in llm["fallbacks"]] == ["used"]
    if rc == 0:  # whatever was built holds every intent clause of its spec
        assert all(c["holds"] for c in out["intent"])


def test_every_shipped_run_is_pinned():
    assert sorted(c for runs in record.COMMANDS.values() for c in runs) == sorted(
        [*EXPECT, "build a tower of three cubes at x 0.4 y 0.2"])


def test_a_cassette_that_no_longer_matches_says_how_to_re_record():
    name, cell, command, extra = RUNS[0]
    rc, _, err = replay(name, cell, command, extra, model="another-model")
    assert rc == 2 and "no longer matches what was recorded" in err
    assert "tests/data/cassettes/record.py" in err and "--record" in err

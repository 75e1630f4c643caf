"""`cellspec dialog`: RoCo's dialog loop with the offline, faulty, openai (a fake server on
127.0.0.1, the real client) and replay agents; feedback, re-plans, execution, metrics."""

from __future__ import annotations

import json
import time

import pytest

from cellspec.agent.base import Budget
from cellspec.agent.dialog import compose_system_prompt, run_episode, sample_scene
from cellspec.agent.dialog_agents import (
    FAULTS,
    FaultyAgents,
    OfflineAgents,
    OpenAIAgents,
    ReplayAgents,
)
from cellspec.cli import main
from cellspec.dsl.parser import load_cell
from cellspec.robots.roco_check import RocoChecker
from tests.conftest import REPO
from tests.test_llm_openai import FakeServer, completion

SORT = REPO / "rules" / "cells" / "sort_cubes.cell"


@pytest.fixture(scope="module")
def cell():
    return load_cell(SORT)


@pytest.fixture(scope="module")
def checker(cell):
    with RocoChecker(cell) as ch:
        yield ch


@pytest.fixture
def server():
    s = FakeServer()
    yield s
    s.close()


def test_offline_agents_sort_the_cubes(cell, checker):
    rec = run_episode(cell, OfflineAgents(), checker=checker)
    assert rec["outcome"] == "success" and rec["metrics"]["success"]
    assert rec["final"] == {"blue_square": "blue_square is in panel2",
                            "pink_polygon": "pink_polygon is in panel4",
                            "yellow_trapezoid": "yellow_trapezoid is in panel6"}
    first = rec["log"][0]["attempts"][0]
    assert [c["agent"] for c in first["calls"]] == ["Alice", "Bob", "Chad"]
    assert "[Decision] PROCEED" in first["calls"][0]["response"]
    assert first["calls"][-1]["response"].count("NAME ") == 3 and first["verdict"] == "pass"
    assert rec["metrics"]["env_steps"] > 0 and all(r["executed"] for r in rec["log"])


@pytest.mark.parametrize("fault, check", [
    ("missing_action", "parse"), ("wrong_goal", "task"), ("out_of_reach", "reach"),
    ("all_wait", "task"), ("path_after_place", "parse"),
])
def test_faulty_agents_make_rocos_mistakes_and_replan(cell, checker, fault, check):
    ad = FaultyAgents(faults=(fault,), rate=1.0, seed=3)
    rec = run_episode(cell, ad, rounds=1, checker=checker)
    tries = rec["log"][0]["attempts"]
    assert tries[0]["verdict"] == "fail" and tries[0]["failures"][0]["check"] == check
    assert tries[0]["feedback"] in tries[1]["calls"][0]["response"] or \
        tries[1]["verdict"] == "pass"  # the feedback reached the re-plan, which then passes
    assert rec["metrics"]["replans"] == 1 and ad.injected == [fault]


def test_feedback_goes_into_the_next_prompt(cell, checker):
    task = checker.task
    st = checker.initial_state()
    from cellspec.agent.dialog import _Memory

    p = compose_system_prompt(task, st, "Bob", _Memory([], []), [], [],
                              ["[Environment Feedback]:\n- Previous Plan:\nX\n"])
    assert p.startswith("\n[Action Options]\n1) PICK <object name> PLACE <location>")
    assert "You are robot Bob in front of panel4." in p
    assert "you can only reach panel3, panel4, panel5" in p
    assert p.rstrip().endswith("[Environment Feedback]:\n- Previous Plan:\nX")


def test_scene_sampler_follows_rocos_rules(checker):
    task, st = checker.task, checker.initial_state()
    for seed in range(20):
        s = sample_scene(task, st, seed)
        start = {o: task.panel_of(o, s) for o in task.objects}
        assert start["blue_square"] in ("panel5", "panel6", "panel7")
        assert start["pink_polygon"] in ("panel1", "panel2", "panel7")
        assert start["yellow_trapezoid"] in ("panel1", "panel2", "panel3")
        assert len(set(start.values())) == 3
    assert sample_scene(task, st, 4) == sample_scene(task, st, 4)


def _say(server, text):
    server.script.append((200, completion(text), 0))


PLAN = ("[Reasons] I am Chad, agreed.\n[Proposal] WAIT\n[Decision] EXECUTE\nNAME Alice ACTION "
        "WAIT\nNAME Bob ACTION PICK yellow_trapezoid PLACE panel5\nNAME Chad ACTION WAIT\n")


def test_openai_agents_through_the_real_client_then_replay(cell, checker, server, tmp_path):
    tape = tmp_path / "dialog.jsonl"
    for who in ("Alice", "Bob"):
        _say(server, f"[Reasons] I am {who}.\n[Proposal] WAIT\n[Decision] PROCEED")
    _say(server, PLAN)
    ad = OpenAIAgents("fake-model", base_url=server.url, api_key="dummy",
                      plan_format="text", record=tape,
                      max_retries=0)
    rec = run_episode(cell, ad, rounds=1, checker=checker)
    assert rec["log"][0]["executed"] and rec["log"][0]["attempts"][0]["verdict"] == "pass"
    assert rec["log"][0]["scene"]["yellow_trapezoid"] == "yellow_trapezoid is on panel5"
    body = server.requests[0]
    assert body["model"] == "fake-model" and body["max_tokens"] == 512
    assert [m["role"] for m in body["messages"]] == ["system"]
    assert body["messages"][0]["content"].endswith("You are Alice, your response is:")
    assert "[Current Chat]\n[Alice]:\n[Reasons] I am Alice." in \
        server.requests[1]["messages"][0]["content"]
    assert rec["metrics"]["tokens"] == 3 * 18
    again = run_episode(cell, ReplayAgents(tape, "fake-model"), rounds=1, checker=checker)
    assert json.dumps(again["log"]) == json.dumps(rec["log"])


def test_llm_failures_become_feedback_and_replans(cell, checker, server):
    _say(server, "")  # an empty answer
    server.script.append((200, completion("no", refusal="I can't help"), 0))
    for _ in range(3):  # the re-plan: one call suffices (EXECUTE at once in a re-plan)
        _say(server, PLAN)
    ad = OpenAIAgents("fake-model", base_url=server.url, api_key="dummy",
                      plan_format="text", max_retries=0)
    rec = run_episode(cell, ad, rounds=1, checker=checker)
    tries = rec["log"][0]["attempts"]
    errors = [c["error"] for c in tries[0]["calls"]]
    assert errors == ["the model returned an empty answer",
                      "the model refused: I can't help"] + [None] * (len(errors) - 2)
    assert rec["log"][0]["executed"]


def test_a_server_error_ends_the_dialog_as_the_environment(cell, checker, server):
    """Issue 31: an HTTP 500 is the server's failure (exit 2 at the CLI), not a turn
    without a plan."""
    from cellspec.agent.base import LLMUnavailable

    server.script.append((500, {"error": {"message": "boom"}}, 0))
    ad = OpenAIAgents("fake-model", base_url=server.url, api_key="dummy",
                      plan_format="text", max_retries=0)
    with pytest.raises(LLMUnavailable, match="HTTP 500: boom"):
        run_episode(cell, ad, rounds=1, checker=checker)


def test_budget_ends_the_episode(cell, checker, server):
    for _ in range(3):
        _say(server, "[Proposal] WAIT\n[Decision] PROCEED")
    ad = OpenAIAgents("fake-model", base_url=server.url, api_key="dummy",
                      plan_format="text",
                      budget=Budget(max_calls=2), max_retries=0)
    rec = run_episode(cell, ad, rounds=3, checker=checker)
    assert rec["outcome"] == "budget" and "budget exceeded: 2 LLM calls" in rec["note"]


@pytest.mark.parametrize("args, message", [
    (["--rounds", "0"], "--rounds must be from 1 to 100"),
    (["--replans", "99"], "--replans must be from 1 to 20"),
    (["--adapter", "replay"], "--adapter replay needs --cassette JSONL"),
    (["--adapter", "replay", "--cassette", "/nonexistent.jsonl"], "no such cassette"),
    (["--fault-rate", "2", "--adapter", "faulty"], "the fault rate must be from 0 to 1"),
    (["--timeout", "nan"], "--timeout"),
])
def test_cli_bad_input_exit_2(capsys, args, message):
    assert main(["dialog", str(SORT), *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_cli_offline_json_is_deterministic_and_faulty_replans(capsys, tmp_path):
    out = tmp_path / "t.json"
    assert main(["dialog", str(SORT), "--format", "json", "--scene-seed", "3", "-o",
                 str(out)]) == 0
    a = capsys.readouterr().out
    assert main(["dialog", str(SORT), "--format", "json", "--scene-seed", "3"]) == 0
    assert capsys.readouterr().out == a and out.read_text() == a
    rec = json.loads(a)
    assert rec["outcome"] == "success" and rec["start"]["blue_square"] == "panel7"
    assert main(["dialog", str(SORT), "--adapter", "faulty", "--fault-rate", "1"]) in (0, 1)
    text = capsys.readouterr().out
    assert "re-plan(s)" in text and " 0 re-plan(s)" not in text
    assert set(FAULTS) >= {"no_execute"}


def test_timeouts_and_429_in_one_dialog(cell, checker, server):
    """A 429 is retried within the call's time-out; a time-out ends the dialog (exit 2)."""
    from cellspec.agent.base import LLMUnavailable

    server.script.append((429, {"error": {"message": "slow down"}}, 0))  # Alice: rate limit
    for _ in range(3):
        server.script.append((200, completion(PLAN), 0))
    ad = OpenAIAgents("fake-model", base_url=server.url, api_key="dummy",
                      plan_format="text", timeout=5,
                      max_retries=1)
    rec = run_episode(cell, ad, rounds=1, replans=1, max_calls=1, checker=checker)
    calls = rec["log"][0]["attempts"][0]["calls"]
    assert [c["error"] for c in calls] == [None] * len(calls)
    assert rec["log"][0]["attempts"][0]["verdict"] == "pass" and rec["log"][0]["executed"]
    server.script.append((200, completion(PLAN), 1.5))  # stalls past the time-out
    ad = OpenAIAgents("fake-model", base_url=server.url, api_key="dummy",
                      plan_format="text", timeout=0.3,
                      max_retries=0)
    t0 = time.perf_counter()
    with pytest.raises(LLMUnavailable, match="timed out"):
        run_episode(cell, ad, rounds=1, replans=1, max_calls=1, checker=checker)
    assert time.perf_counter() - t0 < 1.4
    time.sleep(1.3)  # let the stalled answer finish before the server closes

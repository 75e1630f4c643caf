"""The dialog's JSON plan: the scene's schema, JSON -> RoCo's text (round-trips through
RoCo's parser and cellspec's strict one), garbage as feedback (never a crash), and the
request carrying the schema (a fake server on 127.0.0.1, then a replayed cassette)."""

from __future__ import annotations

import json

import pytest

from cellspec.agent.dialog import run_episode
from cellspec.agent.dialog_agents import (
    PLAN_SCHEMA,
    OpenAIAgents,
    PlanJSONError,
    ReplayAgents,
    plan_schema,
    plan_text,
)
from cellspec.core.errors import CellspecError
from cellspec.robots.roco import parse_plan
from tests.conftest import REPO
from tests.test_dialog import SORT, cell, checker, server  # noqa: F401 (fixtures)
from tests.test_llm_openai import completion


def _plan(decision="EXECUTE", **acts):
    wait = {"action": "WAIT"}
    plan = {a: acts.get(a, wait) for a in ("Alice", "Bob", "Chad")}
    return json.dumps({"reasons": "I am Bob.", "decision": decision, "plan": plan})


BOB = {"action": "PICK", "object": "yellow_trapezoid", "place": "panel5"}


def test_the_schema_names_the_scene(checker):
    task = checker.task
    s = plan_schema(task)
    assert s["required"] == ["reasons", "decision", "plan"]
    assert s["properties"]["decision"]["enum"] == ["PROCEED", "EXECUTE"]
    assert plan_schema(task, execute_only=True)["properties"]["decision"]["enum"] == \
        ["EXECUTE"]
    plan = s["properties"]["plan"]
    assert plan["required"] == list(task.agents) == ["Alice", "Bob", "Chad"]
    assert plan["additionalProperties"] is False
    pick, wait = plan["properties"]["Alice"]["anyOf"]
    assert pick["properties"]["object"]["enum"] == sorted(task.objects) == \
        ["blue_square", "pink_polygon", "yellow_trapezoid"]
    assert pick["properties"]["place"]["enum"] == [f"panel{i}" for i in range(1, 8)]
    assert pick["properties"]["action"] == {"const": "PICK"}
    assert wait["properties"] == {"action": {"const": "WAIT"}}


def test_json_plan_round_trips_through_rocos_parsers(cell, checker):
    task, st = checker.task, checker.initial_state()
    text = plan_text(task, "Bob", _plan(Bob=BOB))
    assert text == ("[Reasons] I am Bob.\n[Proposal] PICK yellow_trapezoid PLACE panel5\n"
                    "[Decision] EXECUTE\nNAME Alice ACTION WAIT\n"
                    "NAME Bob ACTION PICK yellow_trapezoid PLACE panel5\nNAME Chad ACTION WAIT\n")
    res = checker.check(st, text, "Bob")
    assert res.roco_ok and res.ok
    assert {a: t.action for a, t in res.parsed.steps[0].items()}["Bob"] == \
        "PICK yellow_trapezoid PLACE panel5"
    strict = parse_plan(text.split("[Decision] ", 1)[1], "plan.txt", cell)
    assert [a.to_text() for a in strict.actions] == text.split("EXECUTE\n")[1].splitlines()
    proceed = plan_text(task, "Alice", _plan("PROCEED"))
    assert "EXECUTE" not in proceed and "NAME" not in proceed
    # the free text cannot smuggle in a keyword (EXECUTE would cut RoCo's plan short)
    sly = json.loads(_plan(Bob=BOB))
    sly["reasons"] = "EXECUTE\nNAME Alice ACTION PICK x"
    t = plan_text(task, "Bob", json.dumps(sly))
    assert t.count("EXECUTE") == 1 and checker.check(st, t, "Bob").roco_ok


@pytest.mark.parametrize("content, message", [
    ("", "the answer is not a JSON plan"),
    ("NAME Alice ACTION WAIT", "the answer is not a JSON plan"),
    ('{"reasons": "x", "decision": "EXEC', "the answer is not a JSON plan"),
    ("[1, 2]", "the JSON plan is not an object"),
    ('{"decision": "GO", "plan": {}}', "decision must be PROCEED or EXECUTE, not 'GO'"),
    ('{"decision": "EXECUTE"}', 'no "plan" object'),
    ('{"decision": "EXECUTE", "plan": {"Alice": {"action": "WAIT"}}}',
     "no action for Bob, Chad"),
    (_plan(Dave=BOB).replace('"Chad"', '"Dave"'), "unknown robot(s) Dave"),
    (_plan(Bob={"action": "JUMP"}), "must be PICK or WAIT, not 'JUMP'"),
    (_plan(Bob="WAIT"), "action for Bob is not an object"),
    (_plan(Bob={**BOB, "object": "red_cube"}), "'red_cube', not an object of the scene"),
    (_plan(Bob={**BOB, "place": "bin9"}), "'bin9', not a location of the scene"),
])
def test_garbage_json_is_a_clear_error(checker, content, message):
    with pytest.raises(PlanJSONError) as e:
        plan_text(checker.task, "Bob", content)
    assert message in str(e.value) and isinstance(e.value, CellspecError)


def test_the_request_carries_the_schema_then_replays(cell, checker, server, tmp_path):
    tape = tmp_path / "dialog.jsonl"
    for _ in range(2):
        server.script.append((200, completion(_plan("PROCEED")), 0))
    server.script.append((200, completion(_plan(Bob=BOB)), 0))
    ad = OpenAIAgents("fake-model", base_url=server.url, api_key="dummy", record=tape,
                      max_retries=0)
    assert ad.plan_format == "json"  # the openai adapter's default
    rec = run_episode(cell, ad, rounds=1, max_calls=3, checker=checker)
    assert rec["log"][0]["attempts"][0]["verdict"] == "pass" and rec["log"][0]["executed"]
    body = server.requests[0]
    rf = body["response_format"]
    assert rf["type"] == "json_object" and rf["schema"] == plan_schema(checker.task)
    assert "[JSON Answer]" in body["messages"][0]["content"]
    last = server.requests[-1]["response_format"]["schema"]  # the last call must EXECUTE
    assert last["properties"]["decision"]["enum"] == ["EXECUTE"]
    lines = [json.loads(ln) for ln in tape.read_text().splitlines()]
    assert len(lines) == 3 and all(x["response"]["content"].startswith("{") for x in lines)
    assert PLAN_SCHEMA == "roco_plan"
    again = run_episode(cell, ReplayAgents(tape, "fake-model"), rounds=1, max_calls=3,
                        checker=checker)
    assert json.dumps(again["log"]) == json.dumps(rec["log"])


def test_garbage_from_the_model_becomes_replan_feedback(cell, checker, server):
    for bad in ("Sure! Here is the plan.", '{"decision": "EXECUTE", "plan": []}', "{"):
        server.script.append((200, completion(bad), 0))
    server.script.append((200, completion(_plan(Bob=BOB)), 0))  # the re-plan: EXECUTE at once
    ad = OpenAIAgents("fake-model", base_url=server.url, api_key="dummy", max_retries=0)
    rec = run_episode(cell, ad, rounds=1, max_calls=3, checker=checker)
    first, second = rec["log"][0]["attempts"]
    assert [c["error"] is not None for c in first["calls"]] == [True, True, True]
    assert "the answer is not a JSON plan" in first["calls"][0]["error"]
    assert first["failures"][0]["check"] == "parse"
    assert "the answer is not a JSON plan" in first["feedback"]
    assert second["verdict"] == "pass" and rec["log"][0]["executed"]


def test_text_plan_format_stays_available(server):
    ad = OpenAIAgents("fake-model", base_url=server.url, api_key="dummy", plan_format="text")
    assert ad.plan_format == "text"
    with pytest.raises(CellspecError, match="plan format must be one of json, text"):
        OpenAIAgents("fake-model", base_url=server.url, api_key="dummy", plan_format="yaml")


def test_the_real_models_json_plans_replay(cell, checker):
    """Qwen2.5-Coder-0.5B's first bench episode (bench/dialog.py --record): its JSON
    plans are well-formed RoCo plans; RoCo's checks reject them for what they do."""
    tape = REPO / "tests" / "data" / "cassettes" / "dialog_real_model.jsonl"
    rec = run_episode(cell, ReplayAgents(tape, "qwen2.5-coder-0.5b"), rounds=1, replans=2,
                      max_calls=3, scene_seed=0, seed=0, checker=checker)
    tries = rec["log"][0]["attempts"]
    assert [t["roco_verdict"] for t in tries] == ["fail", "fail"]
    assert [t["failures"][0]["check"] for t in tries] == ["task", "task"]
    assert all(t["plan"].count("NAME ") == 3 for t in tries)
    assert rec["metrics"]["llm_calls"] == 4 and rec["outcome"] == "failed"


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_the_cli_passes_the_plan_format(server, fmt, monkeypatch, capsys):
    from cellspec.cli import main

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    answer = _plan(Bob=BOB) if fmt == "json" else "garbage, not a plan"
    server.script.append((200, completion(answer), 0))
    rc = main(["dialog", str(SORT), "--adapter", "openai", "--base-url", server.url,
               "--retries", "0", "--rounds", "1", "--max-calls", "1", "--plan-format", fmt,
               "--format", "json"])
    capsys.readouterr()
    assert rc in (0, 1)
    assert ("response_format" in server.requests[0]) == (fmt == "json")


def test_a_server_that_refuses_response_format_gets_the_schema_in_the_prompt(
        cell, checker, server, tmp_path):
    # json_schema is never sent (llama.cpp refuses it); a server that also refuses
    # json_object with a schema gets plain text with the schema in the prompt, once per run
    refusal = {"error": {"message": "response_format is not supported"}}
    server.script.append((400, refusal, 0))
    for _ in range(3):  # one turn of each robot, the plan in prose
        server.script.append((200, completion("Here: " + _plan(Bob=BOB)), 0))
    tape = tmp_path / "text.jsonl"
    ad = OpenAIAgents("fake-model", base_url=server.url, api_key="dummy", max_retries=0,
                      record=tape)
    rec = run_episode(cell, ad, rounds=1, max_calls=1, checker=checker)
    assert rec["log"][0]["attempts"][0]["verdict"] == "pass" and rec["log"][0]["executed"]
    first, *rest = server.requests
    assert first["response_format"]["type"] == "json_object" and len(rest) == 3
    assert not any("response_format" in r for r in rest) and ad.json_mode == "text"
    assert all("matching this JSON schema" in r["messages"][0]["content"] for r in rest)
    again = run_episode(cell, ReplayAgents(tape, "fake-model"), rounds=1, max_calls=1,
                        checker=checker)  # a text-mode cassette replays too
    assert json.dumps(again["log"]) == json.dumps(rec["log"])


def test_a_refusal_in_the_last_mode_is_the_server(cell, checker, server):
    from cellspec.agent.base import LLMUnavailable

    refusal = {"error": {"message": "response_format is not supported"}}
    server.script += [(400, refusal, 0), (400, {"error": {"message": "bad request"}}, 0)]
    ad = OpenAIAgents("fake-model", base_url=server.url, api_key="dummy", max_retries=0)
    with pytest.raises(LLMUnavailable, match="HTTP 400"):
        run_episode(cell, ad, rounds=1, max_calls=1, checker=checker)

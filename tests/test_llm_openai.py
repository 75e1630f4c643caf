"""The real `openai` client against a fake OpenAI-compatible server started here on
127.0.0.1 (standard library http.server in a thread; no external network), the replay
adapter, and the loop driven by a model."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import cellspec
from cellspec.agent.base import (
    Budget,
    BudgetExceeded,
    LLMUnavailable,
    TranslateError,
    parse_spec,
)
from cellspec.agent.loop import run_design
from cellspec.agent.openai_adapter import (
    ChatAdapter,
    OpenAIAdapter,
    ProposalError,
    ReplayAdapter,
)
from cellspec.core.errors import CellspecError

ROOT = Path(__file__).resolve().parents[1]
CELL = str(ROOT / "rules" / "cells" / "dual_arm_station.cell")
TOWER = "design command {\n    tower(n=2) at (0.4, 0.2)\n}\n"
LINE = "tower(n=2) at (0.4, 0.2)"  # TOWER as the grammar-constrained answer of a model
ASK = "a tower of 2 cubes at x 0.4 y 0.2"  # a command whose words ground LINE
DRAFT = {"structures": [{"kind": "tower", "n": 2, "x": 0.4, "y": 0.2}], "max_levels": None,
         "max_height_m": None, "cannot": None}  # TOWER as a JSON-schema answer
GOOD = {"parts": [{"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025]},
                  {"id": "b", "type": "cube", "pos": [0.4, 0.2, 0.075]}], "order": None}
FLOAT = {"parts": [{"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025]},
                   {"id": "b", "type": "cube", "pos": [0.4, 0.2, 0.1]}], "order": None}


def completion(content, finish="stop", refusal=None):
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": content,
                                     "refusal": refusal}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}


class FakeServer:
    """Answers POST /v1/chat/completions from a script of (status, body, delay)."""

    def __init__(self):
        self.script: list[tuple[int, object, float]] = []
        self.requests: list[dict] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):  # noqa: N802
                n = int(self.headers.get("content-length") or 0)
                outer.requests.append(json.loads(self.rfile.read(n) or b"{}"))
                status, body, delay = (outer.script.pop(0) if outer.script
                                       else (500, {"error": {"message": "no script"}}, 0))
                if delay:
                    time.sleep(delay)
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    if status == 429:
                        self.send_header("retry-after-ms", "10")
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,),
                                       daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def ok(self, obj, **kw):
        self.script.append((200, completion(json.dumps(obj), **kw), 0))

    def line(self, text=LINE, **kw):
        """A translation answered in the design language (grammar mode)."""
        self.script.append((200, completion(text, **kw), 0))

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = FakeServer()
    yield s
    s.close()


@pytest.fixture(scope="module")
def cell():
    return cellspec.load_cell(CELL)


def adapter(server, propose="always", translate="model", **kw):
    kw.setdefault("max_retries", 0)
    kw.setdefault("timeout", 5.0)
    a = OpenAIAdapter("fake-model", base_url=server.url, api_key="dummy", **kw)
    a.propose_mode, a.translate_mode = propose, translate
    return a


def test_request_body_grammar_for_a_local_server(server, cell):
    """A loopback server is asked with a GBNF grammar of the design language built from
    KINDS (no response_format), streamed; the answer is DSL text parsed by the parser."""
    from cellspec.dsl.design import KINDS

    server.line()
    a = adapter(server, temperature=0.2, seed=7)
    assert a.translate(ASK, cell) == TOWER
    body = server.requests[0]
    assert body["model"] == "fake-model" and body["temperature"] == 0.2 and body["seed"] == 7
    assert "response_format" not in body and body["stream"] is True
    assert all(f'k-{k} ::= "{k}("' in body["grammar"] for k in KINDS)
    assert body["messages"][1]["content"] == ASK
    assert a.structured_report()["translate_format"] == "grammar (GBNF)"


def test_request_body_strict_schema(server, cell):
    """The JSON-schema form (remote servers, or a local one without grammars): one anyOf
    branch per kind of the language, kind and word parameters as enums, strict."""
    from cellspec.dsl.design import KINDS

    server.ok(DRAFT)
    a = adapter(server, temperature=0.2, seed=7)
    a.tformat = "json"
    assert a.translate(ASK, cell) == TOWER.replace("tower(n=2)", "tower(n=2)")
    body = server.requests[0]
    rf = body["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    schema = rf["json_schema"]["schema"]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["structures", "max_levels", "max_height_m", "cannot"]
    branches = schema["properties"]["structures"]["items"]["anyOf"]
    assert [b["properties"]["kind"]["enum"] for b in branches] == [[k] for k in KINDS]
    assert branches[1]["properties"]["along"]["enum"] == ["x", "y"]
    assert {"type": "null"} in schema["properties"]["cannot"]["anyOf"]  # nullable, required
    assert a.records[0].prompt_tokens == 11 and a.records[0].ok


def test_429_then_success_with_retries(server, cell):
    server.script.append((429, {"error": {"message": "slow down"}}, 0))
    server.line()
    a = adapter(server, max_retries=2)
    assert a.translate(ASK, cell) == TOWER
    assert len(server.requests) == 2 and a.calls == 1


def test_500_without_retries_is_an_error(server, cell):
    server.script.append((500, {"error": {"message": "boom"}}, 0))
    with pytest.raises(CellspecError, match="HTTP 500"):  # offline cannot parse it either
        adapter(server).translate("sing", cell)
    assert len(server.requests) == 1


def test_stalled_response_times_out(server, cell):
    server.script.append((200, completion(LINE), 1.5))
    t0 = time.perf_counter()
    with pytest.raises(CellspecError, match="timed out"):
        adapter(server, timeout=0.3).translate("sing", cell)
    assert time.perf_counter() - t0 < 1.4


def test_cli_llm_time_out_is_exit_2(server, capsys):
    """Issue 16, defect 9: an LLM time-out is the environment (exit 2), not 'cannot
    translate' (exit 1)."""
    from cellspec.cli import main

    for _ in range(3):  # every structured-output mode the adapter tries stalls
        server.script.append((200, completion(LINE), 1.5))
    rc = main(["design", "a tower", "--cell", str(CELL), "--model", "fake-model", "--base-url",
               server.url, "--timeout", "0.3", "--retries", "0", "--translate", "model"])
    out, err = capsys.readouterr()
    assert rc == 2 and "timed out" in err and "cannot translate" not in out + err


@pytest.mark.parametrize(("reply", "match"), [
    (completion('{"parts": [ {"id": '), "malformed JSON"),
    (completion(None, refusal="I cannot do that"), "refused"),
    (completion('{"parts": []', finish="length"), "truncated"),
    (completion('{"parts": [{"id": "a"}], "order": null}'), "does not match the schema"),
])
def test_bad_answers_are_errors(server, cell, reply, match):
    server.script.append((200, reply, 0))
    a = adapter(server)
    with pytest.raises(ProposalError, match=match):
        a.propose(parse_spec(TOWER), cell, None)
    assert a.records[-1].ok is False


def test_translate_refusal_and_cannot(server, cell):
    server.script.append((200, completion(None, refusal="no"), 0))
    server.line("cannot: not a structure")
    a = adapter(server)
    with pytest.raises(TranslateError, match="cannot translate: the model's answer: the "
                       "model refused"):
        a.translate("sing", cell)
    with pytest.raises(TranslateError, match="the model said: not a structure; the offline "
                       "parser: cannot translate: did not understand 'sing'"):
        a.translate("sing", cell)
    assert a.calls == 2  # a 'cannot' is not argued with: no repair round


def test_budget(server, cell):
    server.line()
    a = adapter(server, budget=Budget(max_calls=1))
    a.translate(ASK, cell)
    with pytest.raises(BudgetExceeded, match="budget exceeded"):
        a.translate(ASK, cell)
    a = adapter(server, budget=Budget(max_tokens=10))
    server.line()
    a.translate(ASK, cell)
    with pytest.raises(BudgetExceeded, match="tokens"):
        a.translate(ASK, cell)


def test_loop_accepts_repairs_reprompts(server, cell):
    server.line()
    server.ok(GOOD)
    r = run_design(ASK, cell, adapter(server))
    assert (r.outcome, r.calls) == ("accepted", 2)
    rec = r.record()
    assert [c.kind for c in rec.calls] == ["translate", "propose"] and rec.tokens == 36
    assert all(c.seconds > 0 for c in rec.calls) and rec.repairs == 0
    server.line()
    server.ok(FLOAT)
    r = run_design(ASK, cell, adapter(server))
    assert r.outcome == "repaired" and r.layout["parts"][1]["pos"][2] == pytest.approx(0.075)
    # wrong count: re-prompted with only the violated constraint, then accepted
    server.line()
    server.ok({"parts": GOOD["parts"][:1], "order": None})
    server.ok(GOOD)
    r = run_design(ASK, cell, adapter(server))
    assert (r.outcome, r.calls) == ("accepted", 3)
    fb = server.requests[-1]["messages"][-1]["content"]
    assert "spec_count" in fb and "needs 2 parts" in fb
    # budget runs out: the solver builds it, and says why
    server.line()
    r = run_design(ASK, cell, adapter(server, budget=Budget(max_calls=1)))
    assert r.outcome == "generated" and "budget exceeded" in r.reason


def replay(tape, model):
    a = ReplayAdapter(tape, model)
    a.propose_mode, a.translate_mode = "always", "model"
    return a


def test_record_then_replay_byte_identical(server, cell, tmp_path):
    tape = tmp_path / "tape.jsonl"
    server.line()
    server.ok(FLOAT)
    live = run_design(ASK, cell, adapter(server, record=tape))
    lines = tape.read_text().splitlines()
    assert len(lines) == 2 and {"hash", "model", "messages", "response"} <= set(json.loads(
        lines[0]))
    n = len(server.requests)
    rep = run_design(ASK, cell, replay(tape, "fake-model"))
    assert len(server.requests) == n  # no network
    a, b = live.to_json(), rep.to_json()
    a.pop("seconds")
    b.pop("seconds")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    # a request not on the tape is an error, never a network call
    with pytest.raises(LLMUnavailable, match="has no answer for this translate request") as e:
        run_design(ASK, cell, replay(tape, "other-model"))
    assert "no longer matches" in str(e.value) and "--record" in str(e.value)
    with pytest.raises(CellspecError, match="no such cassette"):
        ReplayAdapter(tmp_path / "none.jsonl")


def test_cli_openai_record_and_replay(server, tmp_path, monkeypatch, capsys):
    from cellspec.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    tape = tmp_path / "t.jsonl"
    server.line()
    server.ok(GOOD)
    args = ["design", ASK, "--cell", CELL, "--model", "fake-model", "--format", "json",
            "--translate", "model", "--propose", "always"]
    assert main([*args, "--base-url", server.url, "--record", str(tape), "--retries",
                 "0"]) == 0
    live = json.loads(capsys.readouterr().out)
    assert live["outcome"] == "accepted" and live["calls"] == 2
    assert main([*args, "--adapter", "replay", "--cassette", str(tape)]) == 0
    rep = json.loads(capsys.readouterr().out)
    live.pop("seconds")
    rep.pop("seconds")
    assert rep == live
    # the model cannot translate (nor can the offline parser): exit 1 with its reason
    args = ["design", "sing a song", "--cell", CELL, "--model", "fake-model", "--format",
            "json", "--propose", "always"]
    server.line("cannot: a song is not a structure")
    assert main([*args, "--base-url", server.url, "--retries", "0"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["outcome"] == "rejected" and "a song is not a structure" in out["reason"]
    # the model's spec does not parse (a server that ignored the grammar): one repair
    # round with the parser's error, then the offline parser's refusal: exit 1, both said
    args[1] = "a climbing tower of 2 cubes at x 0.4 y 0.2"  # 'climbing': offline refuses
    server.line("towr(n=2)")
    server.line("towr(n=2)")
    assert main([*args, "--base-url", server.url, "--retries", "0"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert "unknown structure 'towr'" in out["reason"] and "climbing" in out["reason"]
    assert out["calls"] == 2
    assert "towr" in server.requests[-1]["messages"][-1]["content"]
    server.line("towr(n=2)")
    server.line()
    server.ok(GOOD)
    assert main([*args, "--base-url", server.url, "--retries", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["outcome"] == "accepted" and out["calls"] == 3


def tool_completion(*calls):
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": None, "tool_calls": [
                             {"id": f"call_{k}", "type": "function",
                              "function": {"name": n, "arguments": a}}
                             for k, (n, a) in enumerate(calls)]}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}}


def test_tool_calling_loop(server, cell):
    """tool_calls in, skill results out, then the layout; each round is one LLM call."""
    server.script.append((200, tool_completion(
        ("verify", json.dumps({"layout": FLOAT})),
        ("verify_gravity", '{"layout": {"parts": "oops"}}')), 0))
    server.script.append((200, tool_completion(
        ("flatten", json.dumps({"layout": FLOAT, "max_layers": 1, "clearance": None}))), 0))
    server.ok(GOOD)
    a = adapter(server, use_tools=True)
    out = a.propose(parse_spec(TOWER), cell, None)
    assert out["parts"] == GOOD["parts"] and a.calls == 3
    assert a.tool_log == [("verify", True), ("verify_gravity", False), ("flatten", True)]
    first = server.requests[0]
    names = [t["function"]["name"] for t in first["tools"]]
    assert names == ["verify", "verify_workspace", "verify_no_overlap", "verify_gravity",
                     "verify_grip_access", "sequence", "task", "spec", "shift", "flatten"]
    assert all(t["function"]["strict"] is True for t in first["tools"])
    msgs = server.requests[1]["messages"]
    assert msgs[2]["role"] == "assistant" and msgs[2]["tool_calls"][0]["id"] == "call_0"
    r0, r1 = json.loads(msgs[3]["content"]), json.loads(msgs[4]["content"])
    assert msgs[3]["tool_call_id"] == "call_0" and r0["verdict"] == "fail"
    assert [v["rule"] for v in r0["violations"]] == ["gravity"]
    assert r1["ok"] is False and "layout.parts" in r1["error"]  # bad args: an error result
    flat = json.loads(server.requests[2]["messages"][-1]["content"])
    assert flat["verdict"] == "pass" and flat["moved"] == ["b"]


def test_tool_loop_is_bounded_by_the_call_budget(server, cell):
    for _ in range(3):
        server.script.append((200, tool_completion(("verify", json.dumps({"layout": GOOD}))),
                              0))
    a = adapter(server, use_tools=True, budget=Budget(max_calls=2))
    with pytest.raises(BudgetExceeded):
        a.propose(parse_spec(TOWER), cell, None)
    assert a.calls == 2 and len(server.requests) == 2


def test_llm_routing_through_the_real_client(server, cell):
    """Design fails (9-cube tower over the workspace top): the model is asked where to go;
    its answer is validated against the allowed transitions."""
    from cellspec.agent.orchestrator import run_orchestrated

    server.line("tower(n=9) at (0.4, 0.2)")
    for _ in range(3):
        server.ok(GOOD)  # 2 parts, not 9: spec_count every time
    server.ok({"next": "Failed", "why": "the tower cannot fit"})
    a = adapter(server)
    o = run_orchestrated("a tower of nine cubes at x 0.4 y 0.2", cell, a,
                         router=a.route)
    design = next(p for p in o.phases if p.phase == "Design")
    assert design.status == "fail" and design.next == "Failed" and design.routed_by == "llm"
    route_req = server.requests[-1]
    assert route_req["response_format"]["json_schema"]["name"] == "RouteOut"
    assert json.loads(route_req["messages"][1]["content"])["allowed"] == ["Replan", "Failed"]
    assert o.result.outcome == "rejected" and o.result.calls == 5


def test_llm_routing_invalid_answer_falls_back(server, cell):
    from cellspec.agent.orchestrator import run_orchestrated

    server.line("tower(n=9) at (0.4, 0.2)")
    for _ in range(3):
        server.ok(GOOD)
    server.ok({"next": "Execute", "why": None})
    a = adapter(server)
    o = run_orchestrated("a tower of nine cubes at x 0.4 y 0.2", cell, a,
                         router=a.route)
    design = next(p for p in o.phases if p.phase == "Design")
    assert design.next == "Failed"
    assert design.routed_by.startswith("rule (llm choice 'Execute' is not allowed")


def test_cli_tools_record_and_replay(server, tmp_path, monkeypatch, capsys):
    """--tools through the CLI: a tool round is recorded and replays identically."""
    from cellspec.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    tape = tmp_path / "t.jsonl"
    server.line()
    server.script.append((200, tool_completion(("verify", json.dumps({"layout": GOOD}))), 0))
    server.ok(GOOD)
    args = ["design", ASK, "--cell", CELL, "--model", "fake-model", "--format", "json",
            "--tools", "--translate", "model"]
    assert main([*args, "--base-url", server.url, "--record", str(tape), "--retries",
                 "0"]) == 0
    live = json.loads(capsys.readouterr().out)
    assert live["outcome"] == "accepted" and live["calls"] == 3
    assert len(tape.read_text().splitlines()) == 3
    assert main([*args, "--adapter", "replay", "--cassette", str(tape)]) == 0
    rep = json.loads(capsys.readouterr().out)
    live.pop("seconds")
    rep.pop("seconds")
    assert rep == live


class Scripted(ChatAdapter):
    """A chat adapter answering from a list of response records (the model's side of the
    exchange, as the openai adapter records it); the tool loop under test is the real one."""

    name = "scripted"

    def __init__(self, responses, **kw):
        super().__init__("scripted", **kw)
        self.responses = list(responses)
        self.propose_mode = "always"

    def _complete(self, kind, messages, schema, tools=None):
        self.sent = messages
        return self.responses.pop(0)


def answer(obj, usage=None):
    return {"content": obj if isinstance(obj, str) else json.dumps(obj),
            "finish_reason": "stop", "refusal": None,
            "usage": usage if usage is not None else {"prompt_tokens": 3,
                                                      "completion_tokens": 2}}


def calls(*c):
    return {"content": None, "finish_reason": "tool_calls", "refusal": None,
            "usage": {"prompt_tokens": 3, "completion_tokens": 2}, "tool_calls": list(c)}


def call(k, name="verify", args=None):
    return {"id": f"c{k}", "name": name,
            "arguments": json.dumps({"layout": GOOD}) if args is None else args}


@pytest.mark.parametrize(("responses", "match"), [
    ([calls({"name": "verify", "arguments": "{}"})], "malformed tool call"),  # no id
    ([calls({"id": 1, "name": "verify", "arguments": "{}"})], "malformed tool call"),
    ([calls({"id": "c", "name": None, "arguments": "{}"})], "malformed tool call"),
    ([calls({"id": "c", "name": "verify", "arguments": 5})], "malformed tool call"),
    ([calls("verify")], "malformed tool call"),
    ([answer("[" * 100_000)], "malformed JSON: nested too deeply"),
    ([answer("{")], "malformed JSON"),
    ([answer({"parts": "none"})], "does not match the schema: parts"),
    ([calls(call(0))] * 9, "no answer after 8 tool rounds"),
])
def test_hostile_model_answers_in_the_tool_loop(cell, responses, match):
    a = Scripted(responses, use_tools=True)
    with pytest.raises(ProposalError, match=match):
        a.propose(parse_spec(TOWER), cell, None)
    if "tool rounds" in match:  # every round was a call; none failed on its own
        assert a.calls == 8 and all(r.error is None for r in a.records)
    else:  # the failing call is recorded with its reason
        assert re.search(match, a.records[-1].error)


def test_too_many_tool_calls_in_one_answer_are_answered_but_not_run(cell):
    a = Scripted([calls(*(call(k) for k in range(20))), answer(GOOD)], use_tools=True)
    out = a.propose(parse_spec(TOWER), cell, None)
    assert out["parts"] == GOOD["parts"]
    assert a.tool_log == [("verify", True)] * 16 + [("verify", False)] * 4
    tool_msgs = [m for m in a.sent if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == [f"c{k}" for k in range(20)]
    assert json.loads(tool_msgs[-1]["content"]) == {
        "ok": False, "error": "verify: not run: at most 16 tool calls per answer"}


@pytest.mark.parametrize("usage", ["lots", {"prompt_tokens": "9", "completion_tokens": -4},
                                   {"prompt_tokens": True}, None])
def test_garbage_token_counts_count_as_zero(cell, usage):
    resp = answer(GOOD)
    resp["usage"] = usage
    a = Scripted([resp])
    assert a.propose(parse_spec(TOWER), cell, None)["parts"] == GOOD["parts"]
    assert (a.records[-1].prompt_tokens, a.records[-1].completion_tokens) == (0, 0)


def test_cli_defaults_translate_what_offline_refuses_and_never_propose(server, capsys):
    """--translate hybrid (default): a command the offline parser understands costs no
    call; one it refuses is translated by the model in one call; --propose auto (default):
    the solver builds; --tools with --propose never is bad input."""
    from cellspec.cli import main

    args = ["--cell", CELL, "--model", "fake-model", "--base-url", server.url, "--retries",
            "0", "--format", "json"]
    assert main(["design", ASK, *args]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["calls"] == 0 and out["outcome"] == "generated" and not server.requests
    assert out["llm"]["notes"] == ["translated by the offline parser (every word used); the "
                                   "model was not asked"]
    server.line()
    assert main(["design", "a climbing tower of 2 cubes at x 0.4 y 0.2", *args]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["calls"] == 1 and out["outcome"] == "generated" and len(server.requests) == 1
    assert out["spec"] == TOWER and out["llm"]["propose"] == "auto"
    assert main(["design", ASK, *args, "--tools", "--propose", "never"]) == 2
    assert "cannot go with --propose never" in capsys.readouterr().err

"""The openai adapter negotiates structured output with the servers people run: fake
OpenAI-compatible servers on 127.0.0.1 reproduce each refusal (llama-cpp-python 0.3.x,
a 400 and a 422 naming response_format), then the mode that worked is kept for the run;
no API key for a loopback URL; the offline parser is the fallback for invalid output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_llm_openai import ASK, DRAFT, GOOD, TOWER, FakeServer, completion

import cellspec
from cellspec.agent.base import TranslateError
from cellspec.agent.openai_adapter import OpenAIAdapter
from cellspec.agent.spec_schema import dsl_grammar, dsl_prompt, translate_prompt
from cellspec.agent.structured import json_text
from cellspec.core.errors import CellspecError

ROOT = Path(__file__).resolve().parents[1]
CELL = str(ROOT / "rules" / "cells" / "dual_arm_station.cell")
# llama-cpp-python 0.3.x answers response_format type json_schema like this (pydantic)
LLAMA_CPP_500 = {"error": {"message": "[{'type': 'literal_error', 'loc': ('body', "
                           "'response_format', 'type'), 'msg': \"Input should be 'text' or "
                           "'json_object'\", 'input': 'json_schema', 'ctx': {'expected': "
                           "\"'text' or 'json_object'\"}}]", "type": "internal_server_error",
                           "param": None, "code": None}}


@pytest.fixture()
def server():
    s = FakeServer()
    yield s
    s.close()


@pytest.fixture(scope="module")
def cell():
    return cellspec.load_cell(CELL)


def make(server, monkeypatch, **kw):
    """The JSON-schema path (what a remote server gets; a local one gets the grammar)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    kw.setdefault("max_retries", 0)
    a = OpenAIAdapter("local-gguf", base_url=server.url, timeout=5.0, **kw)
    a.tformat, a.translate_mode, a.propose_mode = "json", "model", "always"
    return a


def test_llama_cpp_500_falls_back_to_json_object_and_is_remembered(server, cell,
                                                                    monkeypatch):
    server.script.append((500, LLAMA_CPP_500, 0))
    server.ok(DRAFT)
    server.ok(DRAFT)
    a = make(server, monkeypatch)  # no OPENAI_API_KEY: loopback needs none
    assert a.translate(ASK, cell) == TOWER
    assert [r["response_format"]["type"] for r in server.requests] == ["json_schema",
                                                                         "json_object"]
    sent = server.requests[1]["response_format"]
    assert sent["schema"]["required"][0] == "structures"  # llama.cpp's schema key
    # the prompt describes the language already: the schema is not repeated in it
    assert "JSON schema" not in server.requests[1]["messages"][0]["content"]
    assert a.mode == "json_object"
    assert a.mode_log == [{"mode": "json_schema", "status": 500,
                           "message": a.mode_log[0]["message"]}]
    assert "Input should be 'text' or 'json_object'" in a.mode_log[0]["message"]
    a.translate(ASK, cell)  # remembered: straight to json_object
    assert server.requests[2]["response_format"]["type"] == "json_object"
    assert len(server.requests) == 3


def test_400_and_422_naming_response_format_reach_plain_text(server, cell, monkeypatch):
    server.script.append((400, {"error": {"message": "response_format json_schema is not "
                                           "supported", "param": "response_format"}}, 0))
    server.script.append((422, {"detail": [{"loc": ["body", "response_format"],
                                            "msg": "extra fields not permitted"}]}, 0))
    fenced = "Here you go:\n```json\n" + json.dumps(DRAFT) + "\n```"
    server.script.append((200, completion(fenced), 0))
    a = make(server, monkeypatch)
    assert a.translate(ASK, cell) == TOWER
    assert "JSON schema" in server.requests[2]["messages"][0]["content"]  # text: said
    assert "response_format" not in server.requests[2]
    assert a.mode == "text" and [m["status"] for m in a.mode_log] == [400, 422]
    assert a.structured_report()["structured_output"] == "text"


def test_a_500_that_does_not_name_response_format_is_an_error(server, cell, monkeypatch):
    server.script.append((500, {"error": {"message": "out of memory"}}, 0))
    a = make(server, monkeypatch)
    with pytest.raises(CellspecError, match=r"HTTP 500 \(json_schema mode\)"):
        a.propose(cellspec.agent.base.parse_spec(TOWER), cell, None)
    assert len(server.requests) == 1 and a.mode is None


def test_invalid_model_output_falls_back_to_the_offline_parser(server, cell, monkeypatch):
    server.script.append((200, completion("I think a tower would be nice"), 0))
    bad = {**DRAFT, "structures": [{"kind": "enclosure", "w": 2, "d": 2, "h": 1, "x": None,
                                    "y": None}]}
    server.ok(bad)
    server.ok(bad)
    a = make(server, monkeypatch)
    spec = a.translate("a row of six cubes", cell)
    assert "wall(width=6, height=1)" in spec
    assert a.fallbacks[0]["offline"] == "used" and "malformed JSON" in a.fallbacks[0]["why"]
    spec = a.translate("a 5 by 4 platform", cell)  # the model's answer is no enclosure
    assert "block(w=5, d=4, h=1)" in spec and "names block" in a.fallbacks[1]["why"]
    assert a.calls == 3  # one repair round for the second


def test_api_key_only_for_remote_servers(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    OpenAIAdapter("m", base_url="http://localhost:8080/v1")
    OpenAIAdapter("m", base_url="http://127.0.0.1:11434/v1")
    with pytest.raises(CellspecError, match="OPENAI_API_KEY for a remote server"):
        OpenAIAdapter("m", base_url="https://api.example.com/v1")


def test_prompts_carry_the_language_the_lexicon_and_the_cell(cell):
    from cellspec.dsl.design import KINDS

    for p in (translate_prompt(cell), dsl_prompt(cell)):
        for word in ("tower(n: parts)", "packing(n: parts)", "wall = wall, fence",
                     "row = wall with height 1", "workspace x [0.2, 0.7] y [0.05, 0.5]",
                     "height up to 0.3 m", "cube (0.05 x 0.05 x 0.05 m)"):
            assert word in p, word
        assert all(f"{k}(" in p for k in KINDS)
    g = dsl_grammar(cell)
    assert g.count(" ::= ") == 8 + len(KINDS) and "part=" not in g  # one part type: none


@pytest.mark.parametrize(("text", "want"), [
    ('{"a": 1}', '{"a": 1}'),
    ('```json\n{"a": 1}\n```', '{"a": 1}'),
    ('Sure! {"a": 1} hope it helps', '{"a": 1}'),
    ("no json at all", "no json at all"),
])
def test_json_text(text, want):
    assert json_text(text) == want


def test_cli_reports_the_mode_in_json(server, monkeypatch, capsys):
    from cellspec.cli import main

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    server.script.append((500, LLAMA_CPP_500, 0))  # the propose call negotiates
    server.ok(GOOD)
    assert main(["design", ASK, "--cell", CELL, "--model", "local-gguf", "--base-url",
                 server.url, "--retries", "0", "--format", "json", "--propose",
                 "always"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["outcome"] == "accepted"
    assert out["llm"]["structured_output"] == "json_object"
    assert out["llm"]["refused_modes"][0]["status"] == 500


def test_no_fallback_when_scoring_the_model_alone(server, cell, monkeypatch):
    server.script.append((200, completion("not json"), 0))
    a = make(server, monkeypatch)
    a.offline_fallback = False
    with pytest.raises(TranslateError, match="malformed JSON"):
        a.translate("a row of six cubes", cell)


def test_an_invented_position_or_limit_is_dropped_not_kept(cell):
    """Small models copy the prompt's example position: a position, limit or spacing the
    command does not say is dropped when that grounds the answer; a count is never
    changed (a wrong count stays a complaint)."""
    from cellspec.agent.spec_schema import from_lines, grounding, render, strip_invented

    _, _, obj = from_lines("tower(n=5) at (0.3, 0.2)\napart 3", cell)
    assert grounding("stack five cubes", obj, cell)
    assert strip_invented("stack five cubes", obj, cell) == [
        "structure 1's position (0.3, 0.2)", "apart_m 3.0"]
    assert not grounding("stack five cubes", obj, cell)
    assert render(obj, cell) == "design command {\n    tower(n=5)\n}\n"
    _, _, obj = from_lines("tower(n=4) at (0.4, 0.2)", cell)
    assert strip_invented("a tower of 5 cubes at x 0.4 y 0.2", obj, cell) == []
    assert grounding("a tower of 5 cubes at x 0.4 y 0.2", obj, cell) == [
        "the command does not say 4 (use only its numbers; leave x, y and limits null when "
        "it gives none)", "the answer does not use 5 from the command"]


def test_a_part_word_the_cell_does_not_have_is_named(cell):
    """'3 cans' on a cell of cubes: a model answering tower(n=3) would build a substitute
    (bench/intent: 'a tower of 3 cans at x 0.4 y 0.2' must be refused on the station)."""
    from cellspec.agent.spec_schema import from_lines, grounding

    _, _, obj = from_lines("tower(n=3) at (0.4, 0.2)", cell)
    assert grounding("a tower of 3 cans at x 0.4 y 0.2", obj, cell) == [
        "'cans' is not a part type of this cell (part types: cube)"]
    assert grounding("a tower of 3 blocks at x 0.4 y 0.2", obj, cell) == []
    mixed = cellspec.load_cell(str(ROOT / "rules" / "cells" / "mixed_parts.cell"))
    _, _, obj = from_lines("tower(n=3, part=can) at (0.4, 0.2)", mixed)
    assert grounding("a tower of 3 cans at x 0.4 y 0.2", obj, mixed) == []

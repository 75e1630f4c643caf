"""The openai adapter (the real ``openai`` client) and the replay adapter.

Any OpenAI-compatible server works (``base_url`` or ``OPENAI_BASE_URL``: vLLM, llama.cpp
server, Ollama); the key comes from ``OPENAI_API_KEY`` (a dummy works for local servers).
Structured outputs with strict JSON schemas generated from pydantic; a per-call timeout
(30 s by default), explicit retries, a per-command budget of calls and tokens, temperature
and seed options. Model output is only ever parsed as JSON and validated, never executed.
With ``use_tools`` the propose step is a function-calling loop over the skill registry
(:mod:`cellspec.llm_adapters.skills`): tool calls in, skill results (JSON) out, one LLM
call per round, bounded by the call budget and ``max_tool_rounds``. ``route`` answers an
orchestrator branch point (the orchestrator validates the choice).

With ``record=PATH`` every exchange is appended to a JSONL cassette
``{"hash", "model", "messages", "response"}``; :class:`ReplayAdapter` answers from such a
cassette byte-identically and never touches the network (a missing entry is an error).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from cellspec.dsl.design import KINDS, DesignSpec
from cellspec.dsl.errors import CellspecError
from cellspec.llm_adapters.base import (
    Adapter,
    Budget,
    Feedback,
    LayoutOut,
    LLMUnavailable,
    RouteOut,
    SpecOut,
    TranslateError,
    strict_schema,
)

DEFAULT_TIMEOUT = 30.0
DEFAULT_MODEL = "gpt-4o-mini"

TRANSLATE_SYSTEM = (
    "You translate a robot work-cell command into one cellspec design statement. Answer "
    "with JSON {\"spec\": DSL text or null, \"cannot\": reason or null}. Grammar: "
    "`design command {\\n    KIND(PARAM=VALUE, ...) [at (X, Y)] [[CONSTRAINT, ...]]\\n}`. "
    "Kinds and parameters: " + "; ".join(f"{k}({', '.join(p)})" for k, p in KINDS.items())
    + ". packing takes `region x [A, B] y [C, D]`. Constraints: `max height H`, "
    "`count N`, `inside x [A, B] y [C, D]`, `symmetric x|y`. Lengths in metres. If the "
    "command is not a structure you can express, set spec to null and say why in cannot.")
PROPOSE_SYSTEM = (
    "You place cubes for a robot work cell. Answer with JSON {\"parts\": [{\"id\", \"type\", "
    "\"pos\": [x, y, z]}], \"order\": [ids] or null}; pos is the centre of each part's box in "
    "metres. Every part inside the workspace, no two overlapping, each resting on the table "
    "(z = half its height) or on parts below, placed bottom-up in order.")

TOOLS_HINT = (" You may call the tools (verify, verify_workspace, verify_no_overlap, "
              "verify_gravity, verify_grip_access, sequence, task, spec, shift, flatten) to "
              "check or fix a layout before you answer.")

ROUTE_SYSTEM = (
    "You route a robot work-cell design pipeline after a failure. Answer with JSON "
    "{\"next\": one of the allowed phases, \"why\": a short reason or null}.")


class ProposalError(CellspecError):
    """A model answer that cannot be used (malformed, refused, truncated)."""


def request_hash(model: str, messages: list[dict[str, Any]], schema_name: str,
                 tools: list[dict[str, Any]] | None = None) -> str:
    """The cassette key of one request (tools by name only)."""
    obj: dict[str, Any] = {"model": model, "messages": messages, "schema": schema_name}
    if tools:
        obj["tools"] = [t["function"]["name"] for t in tools]
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def cell_summary(cell: Any) -> str:
    ws = cell.workspace
    types = ", ".join(f"{n} size ({', '.join(f'{float(v):g}' for v in t.size)})"
                      for n, t in cell.part_types.items())
    return (f"workspace x [{float(ws.lo[0]):g}, {float(ws.hi[0]):g}] y [{float(ws.lo[1]):g}, "
            f"{float(ws.hi[1]):g}] z [{float(ws.lo[2]):g}, {float(ws.hi[2]):g}]; part types: "
            f"{types}")


def spec_summary(spec: DesignSpec) -> str:
    out = []
    for s in spec.structures:
        p = ", ".join(f"{k}={v}" for k, v in s.params.items())
        at = f" at ({float(s.at[0]):g}, {float(s.at[1]):g})" if s.at else ""
        out.append(f"{s.kind}({p}){at}")
    return "; ".join(out)


MAX_TOOL_CALLS = 16  # skills run per model answer (each may run a solver)


def _tokens(resp: dict[str, Any]) -> tuple[int, int]:
    """(prompt, completion) tokens of a response record; 0 where missing or not a count."""
    usage = resp.get("usage")
    usage = usage if isinstance(usage, dict) else {}

    def count(k: str) -> int:
        v = usage.get(k)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0
    return count("prompt_tokens"), count("completion_tokens")


def _well_formed(calls: Any) -> bool:
    """Whether ``calls`` is a list of tool calls the loop can answer."""
    return isinstance(calls, list) and all(
        isinstance(c, dict) and isinstance(c.get("id"), str) and isinstance(c.get("name"), str)
        and isinstance(c.get("arguments"), str | dict) for c in calls)


class ChatAdapter(Adapter):
    """translate/propose over one ``_complete(kind, messages, schema, tools)`` chat call.
    With ``use_tools`` the propose step runs the skill registry's function-calling loop."""

    max_tool_rounds = 8

    def __init__(self, model: str = DEFAULT_MODEL, budget: Budget | None = None,
                 use_tools: bool = False) -> None:
        super().__init__(budget)
        self.model = model
        self.use_tools = use_tools
        self.tool_log: list[tuple[str, bool]] = []

    def _complete(self, kind: str, messages: list[dict[str, Any]],
                  schema: type[BaseModel], tools: list[dict[str, Any]] | None = None
                  ) -> dict[str, Any]:
        """The response record: {"content", "finish_reason", "refusal", "usage",
        "tool_calls": [{"id", "name", "arguments"}] or absent}."""
        raise NotImplementedError

    def _ask(self, kind: str, messages: list[dict[str, Any]],
             schema: type[BaseModel]) -> BaseModel:
        self.check_budget()
        t0 = time.perf_counter()
        try:
            resp = self._complete(kind, messages, schema)
        except CellspecError as exc:
            self.record(kind, t0, error=str(exc))
            raise
        return self._parse(kind, resp, schema, t0)

    def _parse(self, kind: str, resp: dict[str, Any], schema: type[BaseModel],
               t0: float) -> BaseModel:
        """Validate one response against ``schema`` and record the call."""
        pt, ct = _tokens(resp)
        err = None
        try:
            if resp.get("refusal"):
                raise ProposalError(f"the model refused: {resp['refusal']}")
            if resp.get("finish_reason") == "length":
                raise ProposalError("the model output was truncated (finish_reason length)")
            content = resp.get("content")
            if not isinstance(content, str):
                raise ProposalError("the model returned no content")
            try:
                obj = json.loads(content)
            except (ValueError, RecursionError) as exc:
                why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
                raise ProposalError(f"the model returned malformed JSON: {why}") from None
            try:
                return schema.model_validate(obj)
            except ValidationError as exc:
                first = exc.errors()[0]
                raise ProposalError("the model answer does not match the schema: "
                                    f"{'.'.join(map(str, first['loc']))}: {first['msg']}"
                                    ) from None
        except ProposalError as exc:
            err = str(exc)
            raise
        finally:
            self.record(kind, t0, pt, ct, err)

    def _ask_tools(self, kind: str, messages: list[dict[str, Any]], schema: type[BaseModel],
                   registry: Any) -> BaseModel:
        """The function-calling loop: the model calls skills of ``registry`` (each answered
        with the skill's JSON result) until it answers with ``schema``; every round is one
        LLM call, bounded by the budget and ``max_tool_rounds``."""
        msgs = list(messages)
        tools = registry.tools()
        for _ in range(self.max_tool_rounds):
            self.check_budget()
            t0 = time.perf_counter()
            try:
                resp = self._complete(kind, msgs, schema, tools=tools)
            except CellspecError as exc:
                self.record(kind, t0, error=str(exc))
                raise
            calls = resp.get("tool_calls") or []
            if not calls:
                return self._parse(kind, resp, schema, t0)
            if not _well_formed(calls):
                why = "the model returned a malformed tool call (each needs a string id and " \
                    "name, and arguments)"
                self.record(kind, t0, *_tokens(resp), error=why)
                raise ProposalError(why)
            self.record(kind, t0, *_tokens(resp))
            msgs.append({"role": "assistant", "content": resp.get("content"),
                         "tool_calls": [{"id": c["id"], "type": "function",
                                         "function": {"name": c["name"],
                                                      "arguments": c["arguments"]}}
                                        for c in calls]})
            for k, c in enumerate(calls):
                if k >= MAX_TOOL_CALLS:  # every call gets an answer; the excess is refused
                    result = {"ok": False, "error": f"{c['name']}: not run: at most "
                              f"{MAX_TOOL_CALLS} tool calls per answer"}
                else:
                    result = registry.dispatch(c["name"], c["arguments"])
                self.tool_log.append((c["name"], bool(result.get("ok"))))
                msgs.append({"role": "tool", "tool_call_id": c["id"],
                             "content": json.dumps(result, sort_keys=True)})
        raise ProposalError(f"the model gave no answer after {self.max_tool_rounds} tool "
                            "rounds")

    retranslates = True

    def route(self, phase: str, allowed: list[str], context: dict[str, Any]) -> str:
        """The model's choice of the next phase at a failure branch point (the orchestrator
        validates it against the allowed transitions)."""
        user = json.dumps({"phase": phase, "allowed": allowed, "context": context},
                          sort_keys=True)
        out = self._ask("route", [{"role": "system", "content": ROUTE_SYSTEM},
                                  {"role": "user", "content": user}], RouteOut)
        assert isinstance(out, RouteOut)
        return out.next

    def translate(self, command: str, cell: Any, feedback: str | None = None) -> str:
        user = f"cell: {cell_summary(cell)}\ncommand: {command}"
        if feedback:
            user += f"\nyour last spec was rejected by the parser; fix it: {feedback}"
        messages = [{"role": "system", "content": TRANSLATE_SYSTEM},
                    {"role": "user", "content": user}]
        try:
            out = self._ask("translate", messages, SpecOut)
        except ProposalError as exc:
            raise TranslateError(f"cannot translate: {exc.diagnostics[0].message}") from None
        assert isinstance(out, SpecOut)
        if out.spec is None:
            raise TranslateError(f"cannot translate: {out.cannot or 'the model gave no spec'}")
        return out.spec

    def propose(self, spec: DesignSpec, cell: Any,
                feedback: Feedback | None) -> dict[str, Any] | None:
        user = f"cell: {cell_summary(cell)}\nbuild: {spec_summary(spec)}"
        if feedback is not None:
            user += ("\nyour last layout violated these constraints; fix only these: "
                     + json.dumps(feedback.to_json(), sort_keys=True))
        messages = [{"role": "system", "content": PROPOSE_SYSTEM},
                    {"role": "user", "content": user}]
        if self.use_tools:
            from cellspec.llm_adapters.skills import SkillRegistry

            messages[0] = {"role": "system", "content": PROPOSE_SYSTEM + TOOLS_HINT}
            out = self._ask_tools("propose", messages, LayoutOut, SkillRegistry(cell))
        else:
            out = self._ask("propose", messages, LayoutOut)
        assert isinstance(out, LayoutOut)
        obj: dict[str, Any] = {"units": "m",
                               "parts": [p.model_dump() for p in out.parts]}
        if out.order is not None:
            obj["order"] = list(out.order)
        return obj


MAX_TIMEOUT = 600.0  # seconds per LLM call
MAX_CASSETTE_BYTES = 256 * 1024 * 1024  # a replay cassette larger than this is refused
MAX_RETRIES = 10


class OpenAIAdapter(ChatAdapter):
    """The real ``openai`` client against any OpenAI-compatible server."""

    name = "openai"

    def __init__(self, model: str = DEFAULT_MODEL, *, base_url: str | None = None,
                 api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 max_retries: int = 2, temperature: float | None = 0.0,
                 seed: int | None = 0, budget: Budget | None = None,
                 record: str | os.PathLike[str] | None = None, use_tools: bool = False
                 ) -> None:
        super().__init__(model, budget, use_tools)
        from openai import OpenAI

        from cellspec.commands.common import check_output, check_seconds

        check_seconds(timeout, "the LLM timeout", MAX_TIMEOUT)
        if not (0 <= max_retries <= MAX_RETRIES):
            raise CellspecError(f"max_retries must be from 0 to {MAX_RETRIES}")
        if temperature is not None and not (0 <= temperature <= 2):
            raise CellspecError("the temperature must be a number from 0 to 2")
        url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        if url is not None and not url.startswith(("http://", "https://")):
            raise CellspecError(f"the LLM server URL must start with http:// or https:// "
                                f"(got {url!r})")
        if record:
            check_output(str(Path(record)), "--record")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise CellspecError("the openai adapter needs OPENAI_API_KEY (any value works for a "
                                "local server) or use --adapter offline")
        self.client = OpenAI(api_key=key, base_url=url, timeout=timeout,
                             max_retries=max_retries)
        self.temperature = temperature
        self.seed = seed
        self.record_path = Path(record) if record else None

    def _complete(self, kind: str, messages: list[dict[str, Any]],
                  schema: type[BaseModel], tools: list[dict[str, Any]] | None = None
                  ) -> dict[str, Any]:
        import openai

        kw: dict[str, Any] = {}
        if tools:
            kw["tools"] = tools
        if self.temperature is not None:
            kw["temperature"] = self.temperature
        if self.seed is not None:
            kw["seed"] = self.seed
        try:
            r = self.client.chat.completions.create(
                model=self.model, messages=messages,  # type: ignore[arg-type]
                response_format={"type": "json_schema", "json_schema": {
                    "name": schema.__name__, "strict": True, "schema": strict_schema(schema)}},
                **kw)
        except openai.APITimeoutError:
            raise LLMUnavailable("the LLM call timed out") from None
        except openai.APIStatusError as exc:
            raise LLMUnavailable(f"the LLM server answered HTTP {exc.status_code}") from None
        except openai.APIConnectionError as exc:
            raise LLMUnavailable(f"cannot reach the LLM server: {exc}") from None
        if not r.choices:
            raise ProposalError("the model returned no choices")
        ch = r.choices[0]
        resp = {"content": ch.message.content, "finish_reason": ch.finish_reason,
                "refusal": getattr(ch.message, "refusal", None),
                "usage": {"prompt_tokens": r.usage.prompt_tokens if r.usage else 0,
                          "completion_tokens": r.usage.completion_tokens if r.usage else 0}}
        calls = getattr(ch.message, "tool_calls", None) or []
        if calls:
            resp["tool_calls"] = [{"id": c.id, "name": c.function.name,
                                   "arguments": c.function.arguments} for c in calls
                                  if getattr(c, "function", None) is not None]
        if self.record_path is not None:
            line = json.dumps({"hash": request_hash(self.model, messages, schema.__name__,
                                                    tools),
                               "model": self.model, "messages": messages, "response": resp},
                              sort_keys=True)
            try:
                with self.record_path.open("a", encoding="utf-8") as fh:
                    fh.write(line + "\n")
            except OSError as exc:
                raise CellspecError(f"{self.record_path}: cannot record the exchange: "
                                    f"{exc.strerror or exc}") from None
        return resp


class ReplayAdapter(ChatAdapter):
    """Answers from a JSONL cassette; never uses the network."""

    name = "replay"

    def __init__(self, cassette: str | os.PathLike[str], model: str = DEFAULT_MODEL,
                 budget: Budget | None = None, use_tools: bool = False) -> None:
        super().__init__(model, budget, use_tools)
        p = Path(cassette)
        if not p.exists():
            raise CellspecError(f"{p}: no such cassette")
        from cellspec.core.io import TooLarge, read_text_bounded

        try:
            text = read_text_bounded(p, MAX_CASSETTE_BYTES)
        except TooLarge as exc:
            raise CellspecError(f"{p}: the cassette is {exc}") from None
        except (OSError, UnicodeDecodeError) as exc:
            why = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else \
                (exc.strerror or str(exc)).lower()
            raise CellspecError(f"{p}: cannot read the cassette: {why}") from None
        self.entries: dict[str, dict[str, Any]] = {}
        for k, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                e = json.loads(line)
                if not isinstance(e["hash"], str) or not isinstance(e["response"], dict):
                    raise TypeError
                self.entries.setdefault(e["hash"], e["response"])
            except (ValueError, KeyError, TypeError, RecursionError):
                raise CellspecError(f"{p}:{k}: not a cassette entry") from None

    def _complete(self, kind: str, messages: list[dict[str, Any]],
                  schema: type[BaseModel], tools: list[dict[str, Any]] | None = None
                  ) -> dict[str, Any]:
        h = request_hash(self.model, messages, schema.__name__, tools)
        if h not in self.entries:
            raise CellspecError(f"replay: no cassette entry for this {kind} request "
                                f"(hash {h[:12]}); record it with the openai adapter")
        return self.entries[h]

"""The openai adapter (the real ``openai`` client) and the replay adapter.

Any OpenAI-compatible server works (``base_url`` or ``OPENAI_BASE_URL``: vLLM, llama.cpp
server, Ollama); the key comes from ``OPENAI_API_KEY``, and none is needed for a loopback
URL. Structured output with strict JSON schemas generated from pydantic, negotiated with
the server (:mod:`cellspec.agent.structured`: json_schema -> json_object -> text,
the mode that worked kept for the run); translate falls back to the offline parser when
the model's answer cannot be used (recorded in ``fallbacks``); a per-call timeout
(30 s by default), explicit retries, a per-command budget of calls and tokens, temperature
and seed options. Model output is only ever parsed as JSON and validated, never executed.
With ``use_tools`` the propose step is a function-calling loop over the skill registry
(:mod:`cellspec.agent.skills`): tool calls in, skill results (JSON) out, one LLM
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

from cellspec.agent.base import (
    Adapter,
    Budget,
    BudgetExceeded,
    Feedback,
    LayoutOut,
    LLMUnavailable,
    RouteOut,
    SpecOut,
    TranslateError,
    parse_spec,
)
from cellspec.agent.nl.lexer import lexicon
from cellspec.agent.offline import translate_offline
from cellspec.agent.skills import SkillRegistry
from cellspec.agent.structured import (
    MODES,
    is_loopback,
    json_text,
    names_response_format,
    with_mode,
)
from cellspec.core.errors import CellspecError
from cellspec.core.extras import require
from cellspec.core.io import TooLarge, read_text_bounded
from cellspec.core.limits import (
    MAX_LLM_RETRIES,
    MAX_LLM_TIMEOUT,
    check_llm_limits,
    check_output,
)
from cellspec.dsl.design import KINDS, DesignSpec

DEFAULT_TIMEOUT = 30.0
DEFAULT_MODEL = "gpt-4o-mini"

TRANSLATE_SYSTEM = (
    "You translate a robot work-cell command into one cellspec design statement. Answer "
    "with JSON {\"spec\": DSL text or null, \"cannot\": reason or null}. Grammar: "
    "`design command {\\n    KIND(PARAM=VALUE, ...) [at (X, Y)] [[CONSTRAINT, ...]]\\n}`. "
    "Kinds and parameters: " + "; ".join(f"{k}({', '.join(p)})" for k, p in KINDS.items())
    + ". packing takes `region x [A, B] y [C, D]` and `minimize height|footprint`. "
    "Constraints: `max height H`, `count N`, `inside x [A, B] y [C, D]`, `symmetric x|y`. "
    "Lengths in metres; `at (X, Y)` is the centre of the structure's footprint. If the "
    "command is not a structure you can express (no place, no count, a matter of taste), "
    "set spec to null and say why in cannot.")


def translate_system() -> str:
    """The translate prompt: the design grammar plus the offline lexicon's canonical
    vocabulary, so a model answers in the same words the offline parser knows."""
    raw = lexicon().raw
    kinds = "; ".join(f"{k} ({', '.join(v)})" for k, v in raw["kind"].items())
    sides = ", ".join(f"{s} = {'low' if e == 'lo' else 'high'} {a}"
                      for s, (a, e) in raw["sides"].items())
    return (TRANSLATE_SYSTEM + " Vocabulary (canonical word, then synonyms): " + kinds
            + ". row = wall(height=1); platform = block(h=1); ring = enclosure(h=1). "
            "Sides of the workspace: " + sides + ". Relations: "
            + ", ".join(sorted(raw["rel"])) + " (anchor the first structure beside the "
            "second). Limits: " + ", ".join(raw["limit"]["max_height"][:4])
            + " -> max height; objectives: " + ", ".join(sorted(raw["objective"])) + ".")


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
        self.mode: str | None = None  # structured-output mode that worked (kept for the run)
        self.mode_log: list[dict[str, Any]] = []
        self.fallbacks: list[dict[str, Any]] = []
        self.offline_fallback = True  # translate falls back to the offline parser
        # the task-relevant subgraph of a world database (cellspec world context), put in
        # the translate and propose prompts when given (design --world DB)
        self.world_context: str | None = None

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
                obj = json.loads(json_text(content))
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
        user = f"cell: {cell_summary(cell)}\ncommand: {command}" + self._world()
        if feedback:
            user += f"\nyour last spec was rejected by the parser; fix it: {feedback}"
        messages = [{"role": "system", "content": translate_system()},
                    {"role": "user", "content": user}]
        try:
            out = self._ask("translate", messages, SpecOut)
        except BudgetExceeded:
            raise
        except CellspecError as exc:  # server error or an answer that does not validate
            return self._fallback(command, cell, exc.diagnostics[0].message)
        assert isinstance(out, SpecOut)
        if out.spec is None:
            why = out.cannot or "the model gave no spec"
            try:
                return self._fallback(command, cell, f"the model said: {why}")
            except TranslateError:
                raise TranslateError(f"cannot translate: {why}") from None
        try:
            parse_spec(out.spec)
        except CellspecError as exc:
            try:
                return self._fallback(command, cell, "the model's spec does not parse: "
                                      + exc.diagnostics[0].message)
            except TranslateError:
                return out.spec  # the orchestrator re-asks the model with the diagnostics
        return out.spec

    def _world(self) -> str:
        """The world-model section of a user prompt ('' without a world database)."""
        if not self.world_context:
            return ""
        return ("\nworld model (task-relevant subgraph: entities, relations with confidence "
                "and lifecycle):\n" + self.world_context.rstrip("\n"))

    def _fallback(self, command: str, cell: Any, why: str) -> str:
        """The offline parser's spec when the model's answer cannot be used (recorded)."""
        if not self.offline_fallback:
            raise TranslateError(f"cannot translate: {why}")
        try:
            spec = translate_offline(command, cell)
        except TranslateError as exc:
            self.fallbacks.append({"kind": "translate", "why": why, "offline": str(
                exc.diagnostics[0].message)})
            raise TranslateError(f"cannot translate: {why}; the offline parser: "
                                 f"{exc.diagnostics[0].message}") from None
        self.fallbacks.append({"kind": "translate", "why": why, "offline": "used"})
        return spec

    def structured_report(self) -> dict[str, Any]:
        """The structured-output mode that worked this run, the refusals that led to it,
        and every fall back to the offline parser (the design JSON's ``llm`` field)."""
        return {"structured_output": self.mode, "refused_modes": list(self.mode_log),
                "fallbacks": list(self.fallbacks)}

    def propose(self, spec: DesignSpec, cell: Any,
                feedback: Feedback | None) -> dict[str, Any] | None:
        user = f"cell: {cell_summary(cell)}\nbuild: {spec_summary(spec)}" + self._world()
        if feedback is not None:
            user += ("\nyour last layout violated these constraints; fix only these: "
                     + json.dumps(feedback.to_json(), sort_keys=True))
        messages = [{"role": "system", "content": PROPOSE_SYSTEM},
                    {"role": "user", "content": user}]
        if self.use_tools:
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


MAX_TIMEOUT = MAX_LLM_TIMEOUT  # seconds per LLM call (the validator is core.limits')
MAX_CASSETTE_BYTES = 256 * 1024 * 1024  # a replay cassette larger than this is refused
MAX_RETRIES = MAX_LLM_RETRIES


def server_url(base_url: str | None) -> str | None:
    """The OpenAI-compatible server to talk to (``base_url``, else ``OPENAI_BASE_URL``;
    None: the client's default); bad input unless it is an http(s) URL."""
    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    if url is not None and not url.startswith(("http://", "https://")):
        raise CellspecError(f"the LLM server URL must start with http:// or https:// "
                            f"(got {url!r})")
    return url


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
        OpenAI = require("openai", extra="llm").OpenAI  # the llm extra; says so when missing
        check_llm_limits(timeout, max_retries, temperature)
        url = server_url(base_url)
        if record:
            check_output(str(Path(record)), "--record")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key and is_loopback(url):
            key = "not-needed"  # a local server (llama.cpp, Ollama, vLLM) checks no key
        if not key:
            raise CellspecError("the openai adapter needs OPENAI_API_KEY for a remote server "
                                "(none is needed for a --base-url on 127.0.0.1/localhost) "
                                "or use --adapter offline")
        self.client = OpenAI(api_key=key, base_url=url, timeout=timeout,
                             max_retries=max_retries)
        self.temperature = temperature
        self.seed = seed
        self.record_path = Path(record) if record else None

    def _complete(self, kind: str, messages: list[dict[str, Any]],
                  schema: type[BaseModel], tools: list[dict[str, Any]] | None = None
                  ) -> dict[str, Any]:
        openai = require("openai", extra="llm")

        kw: dict[str, Any] = {}
        if tools:
            kw["tools"] = tools
        if self.temperature is not None:
            kw["temperature"] = self.temperature
        if self.seed is not None:
            kw["seed"] = self.seed
        start = MODES.index(self.mode) if self.mode else 0
        n_refused = len(self.mode_log)
        r = None
        for i in range(start, len(MODES)):
            mode = MODES[i]
            msgs, rf = with_mode(mode, messages, schema)
            if rf is not None:
                kw["response_format"] = rf
            else:
                kw.pop("response_format", None)
            try:
                r = self.client.chat.completions.create(
                    model=self.model, messages=msgs, **kw)  # type: ignore[arg-type]
            except openai.APITimeoutError:
                raise LLMUnavailable("the LLM call timed out") from None
            except openai.APIStatusError as exc:
                if exc.status_code in (400, 422, 500) and names_response_format(exc) \
                        and i + 1 < len(MODES):
                    self.mode_log.append({"mode": mode, "status": exc.status_code,
                                          "message": str(exc.message)[:300]})
                    continue  # the server refuses this response_format: the next mode
                raise LLMUnavailable(f"the LLM server answered HTTP {exc.status_code}"
                                    f" ({mode} mode)") from None
            except openai.APIConnectionError as exc:
                raise LLMUnavailable(f"cannot reach the LLM server: {exc}") from None
            self.mode = mode
            break
        assert r is not None
        if not r.choices:
            raise ProposalError("the model returned no choices")
        ch = r.choices[0]
        resp = {"content": ch.message.content, "finish_reason": ch.finish_reason,
                "refusal": getattr(ch.message, "refusal", None),
                "usage": {"prompt_tokens": r.usage.prompt_tokens if r.usage else 0,
                          "completion_tokens": r.usage.completion_tokens if r.usage else 0}}
        resp["mode"] = self.mode  # kept in a cassette, so a replay reports the same
        if len(self.mode_log) > n_refused:
            resp["refused"] = self.mode_log[n_refused:]
        calls = getattr(ch.message, "tool_calls", None) or []
        if calls:
            resp["tool_calls"] = [{"id": c.id, "name": c.function.name,
                                   "arguments": c.function.arguments} for c in calls
                                  if getattr(c, "function", None) is not None]
        if self.record_path is not None:
            record_exchange(self.record_path, request_hash(self.model, messages,
                                                           schema.__name__, tools),
                            self.model, messages, resp)
        return resp


def record_exchange(path: Path, key: str, model: str, messages: list, resp: dict) -> None:
    """Append one request/response pair to a cassette (JSON lines, sorted keys)."""
    line = json.dumps({"hash": key, "model": model, "messages": messages, "response": resp},
                      sort_keys=True)
    try:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
    except OSError as exc:
        raise CellspecError(f"{path}: cannot record the exchange: "
                            f"{exc.strerror or exc}") from None


class ReplayAdapter(ChatAdapter):
    """Answers from a JSONL cassette; never uses the network."""

    name = "replay"

    def __init__(self, cassette: str | os.PathLike[str], model: str = DEFAULT_MODEL,
                 budget: Budget | None = None, use_tools: bool = False) -> None:
        super().__init__(model, budget, use_tools)
        p = Path(cassette)
        if not p.exists():
            raise CellspecError(f"{p}: no such cassette")

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
        resp = self.entries[h]
        if isinstance(resp.get("mode"), str) and resp["mode"] in MODES:
            self.mode = resp["mode"]
        if isinstance(resp.get("refused"), list):
            self.mode_log.extend(x for x in resp["refused"] if isinstance(x, dict))
        return resp

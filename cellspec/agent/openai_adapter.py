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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from cellspec.agent.base import (
    Adapter,
    Budget,
    BudgetExceeded,
    Feedback,
    LayoutOut,
    LLMUnavailable,
    RouteOut,
    TranslateError,
    parse_spec,
)
from cellspec.agent.http_chat import HTTPStatus, message_of, post_chat
from cellspec.agent.offline import translate_offline
from cellspec.agent.skills import SkillRegistry
from cellspec.agent.spec_schema import (
    DRAFT_NAME,
    GRAMMAR_NAME,
    DraftError,
    draft_schema,
    dsl_grammar,
    dsl_prompt,
    from_lines,
    grounding,
    looks_like_lines,
    refused_phrase,
    render,
    same_spec,
    strip_invented,
    translate_prompt,
)
from cellspec.agent.structured import (
    MODES,
    DictSchema,
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
from cellspec.dsl.design import DesignSpec

if TYPE_CHECKING:
    from cellspec.dsl.model import Cell

DEFAULT_TIMEOUT = 30.0
DEFAULT_MODEL = "gpt-4o-mini"

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


class GrammarRefused(CellspecError):
    """The server refuses a request with a ``grammar`` field (then JSON schemas are used)."""


class GrammarSchema(DictSchema):
    """A translation constrained by a GBNF grammar (llama.cpp's ``grammar`` field): the
    answer is text in the design language, not JSON."""

    def __init__(self, name: str, schema: dict[str, Any], grammar: str) -> None:
        super().__init__(name, schema)
        self.grammar = grammar


def request_hash(model: str, messages: list[dict[str, Any]], schema_name: str,
                 tools: list[dict[str, Any]] | None = None) -> str:
    """The cassette key of one request (tools by name only)."""
    obj: dict[str, Any] = {"model": model, "messages": messages, "schema": schema_name}
    if tools:
        obj["tools"] = [t["function"]["name"] for t in tools]
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def cell_summary(cell: Cell) -> str:
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
        self.propose_mode = "auto"  # auto (only with tools) | always | never
        self.translate_mode = "hybrid"  # hybrid: the offline parser first | model
        self.progress: Callable[[str], None] | None = None
        self.notes: list[str] = []  # what translate decided, for the report

    def _complete(self, kind: str, messages: list[dict[str, Any]],
                  schema: type[BaseModel], tools: list[dict[str, Any]] | None = None
                  ) -> dict[str, Any]:
        """The response record: {"content", "finish_reason", "refusal", "usage",
        "tool_calls": [{"id", "name", "arguments"}] or absent}."""
        raise NotImplementedError

    def _ask(self, kind: str, messages: list[dict[str, Any]],
             schema: Any) -> Any:
        """One model call answered with ``schema`` (a pydantic model: its validated
        instance; a :class:`DictSchema`: the JSON object), recorded, with progress."""
        self.check_budget()
        t0 = time.perf_counter()
        self._say(f"{kind}: asking {self.model} (call {self.calls + 1}, {self.tokens} "
                  "tokens so far)")
        try:
            resp = self._complete(kind, messages, schema)
        except CellspecError as exc:
            self.record(kind, t0, error=str(exc))
            raise
        try:
            return self._parse(kind, resp, schema, t0)
        finally:
            r = self.records[-1]
            self._say(f"{kind}: {r.prompt_tokens} + {r.completion_tokens} tokens in "
                      f"{r.seconds:.1f} s ({self.tokens} tokens so far)")

    def _say(self, line: str) -> None:
        """Progress on a terminal (``progress``: a callable taking a line, or None)."""
        if self.progress is not None:
            self.progress(line)

    def _parse(self, kind: str, resp: dict[str, Any], schema: Any,
               t0: float) -> Any:
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
            if isinstance(schema, GrammarSchema):
                return content
            try:
                obj = json.loads(json_text(content))
            except (ValueError, RecursionError) as exc:
                why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
                raise ProposalError(f"the model returned malformed JSON: {why}") from None
            if isinstance(schema, DictSchema):
                if not isinstance(obj, dict):
                    raise ProposalError("the model answer is not a JSON object")
                return obj
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

    def translate(self, command: str, cell: Cell, feedback: str | None = None) -> str:
        """DSL text of one design statement, parsed by the design parser before it is
        returned. ``hybrid`` (the default): the offline parser's spec when it parses the
        command (no model call: it uses every word or refuses); else the model, with its
        answer constrained to the design language (:mod:`spec_schema`), rendered as DSL,
        parsed and grounded in the command's words; one repair round with the parser's or
        the grounding's complaint; then the offline parser's refusal. ``model``: the model
        first, the offline parser only as the fall-back."""
        offline: str | None = None
        offline_why = ""
        if self.offline_fallback:
            try:
                offline = translate_offline(command, cell)
            except TranslateError as exc:
                offline_why = exc.diagnostics[0].message
        if offline is not None and self.translate_mode == "hybrid":
            self.notes.append("translated by the offline parser (every word used); the "
                              "model was not asked")
            return offline
        why = ""
        fmt = self.translate_format(command, cell)
        messages = self._translate_messages(fmt, command, cell)
        for round_ in range(2):
            schema = self._translate_schema(fmt, cell)
            try:
                answer = self._ask("translate", messages, schema)
            except (BudgetExceeded, LLMUnavailable):
                raise
            except GrammarRefused:
                self.tformat = fmt = "json"  # the server has no grammar field: JSON schema
                messages = self._translate_messages(fmt, command, cell)
                answer = self._ask("translate", messages, self._translate_schema(fmt, cell))
            except CellspecError as exc:  # an answer that is not a JSON object
                why = exc.diagnostics[0].message
                break
            if fmt == "grammar":
                if not looks_like_lines(answer):  # the server ignored the grammar
                    self.tformat = "json"
                text, complaints, said = self._check_lines(command, answer, cell)
                shown = answer
            else:
                text, complaints = self._check_draft(command, answer, cell)
                said = answer.get("cannot") if not answer.get("structures") else None
                shown = json.dumps(answer)
            if said is not None and offline is None:
                why = f"the model said: {said}"
                break
            if not complaints and text is not None:
                spec = parse_spec(text)
                if offline is not None and not same_spec(spec, parse_spec(offline)):
                    self.fallbacks.append({"kind": "translate", "why": "the model's spec "
                                           "differs from the offline parser's", "model": text,
                                           "offline": "used"})
                    return offline
                self.notes.append(f"translated by the model ({fmt})" + (
                    " after one repair round" if round_ else ""))
                return text
            why = "; ".join(complaints)
            if refused_phrase(command):  # an open request: no repair round can answer it
                break
            if round_ == 0:
                messages = [*messages, {"role": "assistant", "content": shown},
                            {"role": "user", "content": "That answer was rejected: " + why
                             + ". Answer again for the same command: " + command}]
        return self._fallback(command, cell, f"the model's answer: {why}", offline,
                              offline_why)

    tformat: str | None = None  # the translation's answer format: grammar | json

    def translate_format(self, command: str, cell: Cell) -> str:
        """``grammar`` (GBNF: llama.cpp servers) or ``json`` (the design language as a JSON
        schema with enums), negotiated once per run."""
        return self.tformat or "json"

    def _translate_messages(self, fmt: str, command: str, cell: Cell) -> list[dict[str, Any]]:
        system = dsl_prompt(cell) if fmt == "grammar" else translate_prompt(cell)
        return [{"role": "system", "content": system},
                {"role": "user", "content": command + self._world()}]

    def _translate_schema(self, fmt: str, cell: Cell) -> DictSchema:
        if fmt == "grammar":
            return GrammarSchema(GRAMMAR_NAME, {}, grammar=dsl_grammar(cell))
        return DictSchema(DRAFT_NAME, draft_schema(cell))

    def _check_lines(self, command: str, answer: Any, cell: Cell
                     ) -> tuple[str | None, list[str], str | None]:
        """A grammar answer: (DSL text, complaints, the model's ``cannot`` reason)."""
        if not isinstance(answer, str):
            return None, ["the answer is not text"], None
        try:
            text, said, obj = from_lines(answer, cell)
        except (CellspecError, DraftError) as exc:
            msg = exc.diagnostics[0].message if isinstance(exc, CellspecError) else str(exc)
            return None, [f"the design parser: {msg}"], None
        if obj is None:
            return None, [f"the model said: {said}"], said
        complaints = grounding(command, obj, cell)
        if complaints:  # an invented position or limit is dropped when that grounds it
            dropped = strip_invented(command, obj, cell)
            if dropped and not grounding(command, obj, cell):
                self.notes.append("dropped what the command does not say: "
                                  + "; ".join(dropped))
                return render(obj, cell), [], None
        return text, complaints, None

    def _check_draft(self, command: str, obj: dict[str, Any], cell: Cell
                     ) -> tuple[str | None, list[str]]:
        """(the DSL text, []) for an answer that renders, parses and is grounded in the
        command; (None or the text, the complaints) otherwise."""
        try:
            render(obj, cell)  # the schema's shape first: grounding reads the fields
            complaints = grounding(command, obj, cell)
            if complaints:  # an invented position or limit is dropped when that grounds it
                trial = json.loads(json.dumps(obj))
                dropped = strip_invented(command, trial, cell)
                if dropped and not grounding(command, trial, cell):
                    complaints = []
                    obj.clear()
                    obj.update(trial)
                    self.notes.append("dropped what the command does not say: "
                                      + "; ".join(dropped))
            text = render(obj, cell)
        except DraftError as exc:
            return None, [str(exc)]
        if complaints:
            return text, complaints
        try:
            parse_spec(text)
        except CellspecError as exc:
            return text, [f"the design parser: {exc.diagnostics[0].message}"]
        return text, []

    def _world(self) -> str:
        """The world-model section of a user prompt ('' without a world database)."""
        if not self.world_context:
            return ""
        return ("\nworld model (task-relevant subgraph: entities, relations with confidence "
                "and lifecycle):\n" + self.world_context.rstrip("\n"))

    def _fallback(self, command: str, cell: Cell, why: str, offline: str | None = None,
                  offline_why: str = "") -> str:
        """The offline parser's spec when the model's answer cannot be used (recorded),
        else TranslateError naming both reasons (an honest refusal)."""
        if not self.offline_fallback:
            raise TranslateError(f"cannot translate: {why}")
        if offline is None and not offline_why:
            try:
                offline = translate_offline(command, cell)
            except TranslateError as exc:
                offline_why = exc.diagnostics[0].message
        if offline is None:
            self.fallbacks.append({"kind": "translate", "why": why, "offline": offline_why})
            raise TranslateError(f"cannot translate: {why}; the offline parser: "
                                 f"{offline_why}")
        self.fallbacks.append({"kind": "translate", "why": why, "offline": "used"})
        return offline

    def structured_report(self) -> dict[str, Any]:
        """The structured-output mode that worked this run, the refusals that led to it,
        and every fall back to the offline parser (the design JSON's ``llm`` field)."""
        return {"structured_output": self.mode, "refused_modes": list(self.mode_log),
                "fallbacks": list(self.fallbacks), "translate": self.translate_mode,
                "translate_format": ("grammar (GBNF)" if self.tformat == "grammar"
                                     else self.tformat),
                "propose": self.propose_mode, "notes": list(self.notes),
                "tokens": {"prompt": sum(r.prompt_tokens for r in self.records),
                           "completion": sum(r.completion_tokens for r in self.records),
                           "total": self.tokens}}

    def proposes(self) -> bool:
        """Whether the model proposes layouts (``auto``: only with the tool loop; else
        the solver builds from the spec: measured, a small model's proposals never beat
        it, docs/models.md)."""
        return self.propose_mode == "always" or (self.propose_mode == "auto"
                                                 and self.use_tools)

    def propose(self, spec: DesignSpec, cell: Cell,
                feedback: Feedback | None) -> dict[str, Any] | None:
        if not self.proposes():
            return None
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
        del OpenAI  # the llm extra is checked; the transport is http_chat (bounded calls)
        self.base_url, self.api_key = url, key
        self.timeout, self.max_retries = timeout, max_retries
        self.temperature = temperature
        self.seed = seed
        self.record_path = Path(record) if record else None

    def translate_format(self, command: str, cell: Cell) -> str:
        """``grammar`` first for a loopback server (llama.cpp's ``grammar`` field; a refusal
        or an answer that ignores it switches to ``json``), ``json`` for a remote one."""
        if self.tformat is None:
            self.tformat = "grammar" if is_loopback(self.base_url) else "json"
        return self.tformat

    def _complete(self, kind: str, messages: list[dict[str, Any]],
                  schema: Any, tools: list[dict[str, Any]] | None = None
                  ) -> dict[str, Any]:
        """One chat call (:func:`http_chat.post_chat`: the whole call, retries included,
        within ``timeout``), negotiating the structured-output mode with the server."""
        kw: dict[str, Any] = {}
        if tools:
            kw["tools"] = tools
        if self.temperature is not None:
            kw["temperature"] = self.temperature
        if self.seed is not None:
            kw["seed"] = self.seed
        if kind == "translate":
            kw["max_tokens"] = TRANSLATE_MAX_TOKENS
        if not tools:
            kw["stream"] = True  # a server stops generating when the call is abandoned
            kw["stream_options"] = {"include_usage": True}
        if isinstance(schema, GrammarSchema):
            return self._complete_grammar(messages, schema, kw)
        start = MODES.index(self.mode) if self.mode else 0
        n_refused = len(self.mode_log)
        obj = None
        for i in range(start, len(MODES)):
            mode = MODES[i]
            msgs, rf = with_mode(mode, messages, schema)
            if rf is not None:
                kw["response_format"] = rf
            else:
                kw.pop("response_format", None)

            def refusal(exc: HTTPStatus, i: int = i) -> bool:
                return exc.status in (400, 422, 500) and names_response_format(exc) \
                    and i + 1 < len(MODES)
            try:
                obj = post_chat(self.base_url, self.api_key,
                                {"model": self.model, "messages": msgs, **kw},
                                timeout=self.timeout, max_retries=self.max_retries,
                                no_retry=refusal, on_chunk=self._chunks)
            except HTTPStatus as exc:
                if refusal(exc):
                    self.mode_log.append({"mode": mode, "status": exc.status,
                                          "message": exc.message[:300]})
                    continue  # the server refuses this response_format: the next mode
                raise LLMUnavailable(f"the LLM server answered HTTP {exc.status}"
                                     f" ({mode} mode): {exc.message[:200]}") from None
            self.mode = mode
            break
        assert obj is not None
        return self._finish(obj, messages, schema, tools, n_refused=n_refused)

    def _chunks(self, n: int) -> None:
        """Progress of a streamed answer: every 8 chunks (about a token each)."""
        if n % 8 == 0:
            self._say(f"  ... {n} tokens")

    def _complete_grammar(self, messages: list[dict[str, Any]], schema: GrammarSchema,
                          kw: dict[str, Any]) -> dict[str, Any]:
        """A translation constrained by the GBNF grammar (no ``response_format``)."""
        try:
            obj = post_chat(self.base_url, self.api_key,
                            {"model": self.model, "messages": messages,
                             "grammar": schema.grammar, **kw},
                            timeout=self.timeout, max_retries=self.max_retries,
                            no_retry=lambda e: "grammar" in e.text, on_chunk=self._chunks)
        except HTTPStatus as exc:
            if exc.status in (400, 422, 500) and "grammar" in exc.text:
                self.mode_log.append({"mode": "grammar", "status": exc.status,
                                      "message": exc.message[:300]})
                raise GrammarRefused("the server refuses the grammar field") from None
            raise LLMUnavailable(f"the LLM server answered HTTP {exc.status} (grammar "
                                 f"mode): {exc.message[:200]}") from None
        self.grammar_used = True
        return self._finish(obj, messages, schema, None, mode="grammar",
                            n_refused=len(self.mode_log))

    grammar_used = False

    def _finish(self, obj: dict[str, Any], messages: list[dict[str, Any]], schema: Any,
                tools: list[dict[str, Any]] | None, mode: str | None = None,
                n_refused: int = 0) -> dict[str, Any]:
        """The response record of a completion object (recorded to the cassette)."""
        resp = message_of(obj)
        if resp.pop("no_choices", False):
            raise ProposalError("the model returned no choices")
        resp["mode"] = mode or self.mode  # kept in a cassette: a replay reports the same
        if len(self.mode_log) > n_refused:
            resp["refused"] = self.mode_log[n_refused:]
        if self.record_path is not None:
            record_exchange(self.record_path, request_hash(self.model, messages,
                                                           schema.__name__, tools),
                            self.model, messages, resp)
        return resp


TRANSLATE_MAX_TOKENS = 400  # a translation's answer (a few structures); more is a runaway


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


RERECORD = ("re-record it against a model server: cellspec design COMMAND --cell CELL "
            "--adapter openai --base-url URL --model MODEL --record FILE (or "
            "python tests/data/cassettes/record.py for the shipped ones; docs/models.md)")


def stale_cassette(path: Path, kind: str, key: str) -> str:
    """The message of a request a cassette has no answer for: the prompt (or the request)
    changed since it was recorded, and how to re-record it."""
    return (f"replay: {path} has no answer for this {kind} request (hash {key[:12]}): the "
            "prompt or the request no longer matches what was recorded (the prompt, the "
            "schema, the model name or the command changed); " + RERECORD)


class ReplayAdapter(ChatAdapter):
    """Answers from a JSONL cassette; never uses the network."""

    name = "replay"

    def __init__(self, cassette: str | os.PathLike[str], model: str = DEFAULT_MODEL,
                 budget: Budget | None = None, use_tools: bool = False) -> None:
        super().__init__(model, budget, use_tools)
        p = Path(cassette)
        self.path = p
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

    def translate_format(self, command: str, cell: Cell) -> str:
        """The format the cassette was recorded in: ``grammar`` when it answers the
        grammar request of this command, else ``json``."""
        msgs = self._translate_messages("grammar", command, cell)
        h = request_hash(self.model, msgs, GRAMMAR_NAME, None)
        self.tformat = "grammar" if h in self.entries else "json"
        return self.tformat

    def _complete(self, kind: str, messages: list[dict[str, Any]],
                  schema: Any, tools: list[dict[str, Any]] | None = None
                  ) -> dict[str, Any]:
        h = request_hash(self.model, messages, schema.__name__, tools)
        if h not in self.entries:
            raise LLMUnavailable(stale_cassette(self.path, kind, h))
        resp = self.entries[h]
        if isinstance(resp.get("mode"), str) and resp["mode"] in MODES:
            self.mode = resp["mode"]
        if isinstance(resp.get("refused"), list):
            self.mode_log.extend(x for x in resp["refused"] if isinstance(x, dict))
        return resp

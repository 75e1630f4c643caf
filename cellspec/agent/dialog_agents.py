"""The agents of RoCo's dialog: an LLM (openai or a replayed cassette) or a built-in planner.

Each agent answers one turn of the dialog with free text, as in RoCo
(``prompting/dialog_prompter.py``, ``query_once``: one ``system`` message holding the
whole prompt, the answer's text used as is). Adapters:

* ``OfflineAgents``: a deterministic per-robot planner. It reads the same view the prompt is
  written from (the task, the state, the proposals so far this round, the feedback) and
  answers in RoCo's response style ([Reasons] / [Proposal] / [Decision]), the last speaker
  writing ``EXECUTE`` and the plan once every robot has proposed. It is a stand-in that lets
  the loop be tested and benchmarked without a model, not a model.
* ``FaultyAgents``: the offline planner with RoCo's typical mistakes injected (seeded) into
  the first plan of a round: a line without ACTION, a cube put on another cube's goal panel,
  a cube picked out of reach, everyone WAITing, PATH written after the PLACE target, no
  EXECUTE at all; it corrects itself once it has seen the feedback.
* ``OpenAIAgents``: the real ``openai`` client (any OpenAI-compatible server), per-call
  timeout and retries, the design adapter's budget, record to a JSONL cassette;
  ``ReplayAgents`` answers from such a cassette byte-identically, without the network.
  By default (``plan_format="json"``) the model answers with a JSON plan bound by the
  scene's schema (:func:`plan_schema`: the robots, objects and locations by name, PICK ...
  PLACE ... or WAIT; ``json_object`` with the schema, a grammar on llama.cpp), which
  :func:`plan_text` writes as RoCo's text before RoCo's checks and cellspec's judge it; a
  JSON plan that cannot be read is a ``PlanJSONError`` naming why (feedback, a re-plan).
  ``plan_format="text"``: RoCo's own unconstrained text answer.

Every LLM failure (timeout, HTTP 429/500 after retries, refusal, truncation, an empty
answer) raises ``CellspecError`` (``BudgetExceeded`` for the budget); the dialog loop
turns it into feedback and a re-plan, as ``design`` does.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cellspec.agent.base import Adapter, Budget, LLMUnavailable
from cellspec.agent.http_chat import HTTPStatus, message_of, post_chat
from cellspec.agent.openai_adapter import (
    DEFAULT_MODEL,
    DEFAULT_TIMEOUT,
    ProposalError,
    ReplayAdapter,
    record_exchange,
    request_hash,
    server_url,
    stale_cassette,
)
from cellspec.agent.structured import (
    DictSchema,
    is_loopback,
    json_text,
    names_response_format,
    with_mode,
)
from cellspec.core.errors import CellspecError
from cellspec.core.extras import require
from cellspec.core.limits import check_llm_limits, check_output
from cellspec.robots.roco_task import SortState, SortTask

if TYPE_CHECKING:
    from cellspec.dsl.model import Cell

MAX_RESPONSE_TOKENS = 512  # RoCo's DialogPrompter max_tokens
PLAN_FORMATS = ("json", "text")  # the openai agents' answer: a schema-bound JSON plan, RoCo's text
PLAN_SCHEMA = "roco_plan"  # the JSON plan's schema name (request, cassette key)
MAX_REASONS = 200  # characters of the JSON plan's free text
FAULTS = ("missing_action", "wrong_goal", "out_of_reach", "all_wait", "path_after_place",
          "no_execute")


@dataclass
class AgentView:
    """What one agent sees on its turn: the prompt text and the facts it is written from."""

    agent: str
    system: str
    user: str
    task: SortTask
    state: SortState
    proposals: dict[str, str]  # this dialog round, agent -> action text
    replan: int
    failures: list[tuple[str, tuple[str, ...], dict[str, str]]] = field(default_factory=list)
    last_call: bool = False
    everyone_spoke: bool = False


class DialogAgents(Adapter):
    """Answers one dialog turn with text."""

    name = "dialog"

    def translate(self, command: str, cell: Cell, feedback: str | None = None) -> str:
        raise CellspecError("dialog agents do not translate design commands")

    def propose(self, spec, cell, feedback):
        raise CellspecError("dialog agents do not propose layouts")

    def respond(self, view: AgentView) -> str:
        """The agent's answer for this turn (CellspecError on an LLM failure)."""
        raise NotImplementedError


# -- the offline planner --------------------------------------------------------------------
def _dist_to_goal(task: SortTask, obj: str, x: float) -> float:
    return abs(float(task.panels[task.cube_to_bin[obj]].pos[0]) - x)


def plan_for(task: SortTask, state: SortState, agent: str, taken: dict[str, str],
             banned: set[str]) -> tuple[str, str]:
    """The offline planner's (action, reason) for one robot: move the cube it can reach
    that gains most towards its goal (its own cube first), not one another robot took."""
    claimed = {a.split("PICK")[1].split("PLACE")[0].strip() for a in taken.values()
               if "PICK" in a and "PLACE" in a}
    busy = []  # pick and place spots of the others this round
    for other, a in taken.items():
        if "PICK" in a and "PLACE" in a:
            o = a.split("PICK")[1].split("PLACE")[0].strip()
            t = a.split("PLACE")[1].strip()
            if o in state.centres:
                busy.append(task.top_site(o, state))
            p = task.target_pos(other, t, state)
            if p is not None:
                busy.append(p)
    own = next((o for o, g in task.cube_to_bin.items()
                if task.in_reach(agent, task.target_pos(agent, g, state))), None)
    best: tuple[tuple, str, str] | None = None
    for obj in sorted(task.objects):
        if obj in claimed or state.holding.get(agent) not in (None, obj):
            continue
        if task.done_cube(obj, state):
            continue
        pick = task.top_site(obj, state)
        if not task.in_reach(agent, pick):
            continue
        here = _dist_to_goal(task, obj, pick[0])
        for panel in [task.cube_to_bin[obj]] + list(task.handover_panels()):
            dst = task.target_pos(agent, panel, state)
            if dst is None or not task.in_reach(agent, dst):
                continue
            gain = here - _dist_to_goal(task, obj, dst[0])
            action = f"PICK {obj} PLACE {panel}"
            if gain <= 1e-9 or action in banned:
                continue
            if any(o2 != obj and o2 not in claimed and np.hypot(c[0] - dst[0], c[1] - dst[1])
                   < 0.15 for o2, c in state.centres.items()):
                continue  # another cube rests there (cellspec's `occupied` check)
            if any(np.linalg.norm(np.asarray(b[:2]) - pick[:2]) < 0.3
                   or np.linalg.norm(np.asarray(b[:2]) - dst[:2]) < 0.3 for b in busy):
                continue
            key = (panel != task.cube_to_bin[obj], obj != own, -gain, obj, panel)
            if best is None or key < best[0]:
                why = ("it is my own goal" if panel == task.cube_to_bin[obj] else
                       f"{panel} is closer to {task.cube_to_bin[obj]}")
                best = (key, action, f"I can reach {obj}; I will put it on {panel}, {why}.")
    if best is None:
        return "WAIT", "I cannot move any cube closer to its goal this round, so I WAIT."
    return best[1], best[2]


class OfflineAgents(DialogAgents):
    """A deterministic per-robot planner answering in RoCo's response style."""

    name = "offline"

    def __init__(self, budget: Budget | None = None) -> None:
        super().__init__(budget)
        self.model = "offline-planner"

    def banned(self, view: AgentView) -> set[str]:
        """Actions the feedback of this round ruled out for this agent."""
        out: set[str] = set()
        for check, robots, actions in view.failures:
            # a collision: the later robot of the pair gives way; otherwise each named robot
            blamed = robots[-1:] if check == "collision" else robots
            if view.agent in blamed and view.agent in actions:
                out.add(actions[view.agent])
        return out

    def respond(self, view: AgentView) -> str:
        t0 = time.perf_counter()
        self.check_budget()
        others = {a: p for a, p in view.proposals.items() if a != view.agent}
        action, why = plan_for(view.task, view.state, view.agent, others, self.banned(view))
        reach = ", ".join(p for p in view.task.panels
                          if view.task.in_reach(view.agent, view.task.target_pos(
                              view.agent, p, view.state)))
        text = (f"[Reasons] I am {view.agent}, I can reach {reach}. {why}\n"
                f"[Proposal] {action}\n")
        props = {**view.proposals, view.agent: action}
        if view.everyone_spoke or view.last_call or len(props) == len(view.task.agents):
            text += "[Decision] EXECUTE\n" + "".join(
                f"NAME {a} ACTION {props.get(a, 'WAIT')}\n" for a in view.task.agents)
        else:
            text += "[Decision] PROCEED\n"
        self.record("dialog", t0)
        return text


class FaultyAgents(OfflineAgents):
    """The offline planner making RoCo's typical mistakes in a round's first plan."""

    name = "faulty"

    def __init__(self, faults: tuple[str, ...] = FAULTS, rate: float = 0.5, seed: int = 0,
                 budget: Budget | None = None) -> None:
        super().__init__(budget)
        bad = [f for f in faults if f not in FAULTS]
        if bad or not faults:
            raise CellspecError(f"unknown fault(s) {bad}; known: {', '.join(FAULTS)}")
        if not 0 <= rate <= 1:
            raise CellspecError("the fault rate must be from 0 to 1")
        self.faults, self.rate = faults, rate
        self.rng = random.Random(seed)
        self.model = "faulty-planner"
        self.injected: list[str] = []

    def respond(self, view: AgentView) -> str:
        text = super().respond(view)
        if "EXECUTE" not in text or view.replan > 0 or self.rng.random() >= self.rate:
            return text
        fault = self.rng.choice(self.faults)
        self.injected.append(fault)
        head, plan = text.split("EXECUTE\n", 1)
        lines = plan.splitlines()
        t = view.task
        if fault == "missing_action":  # RoCo's example response #2: "NAME Chad WAIT"
            lines[-1] = lines[-1].replace(" ACTION ", " ")
        elif fault == "wrong_goal":
            goals = sorted(set(t.cube_to_bin.values()))
            for i, ln in enumerate(lines):
                if "PICK" in ln and "PLACE" in ln:
                    obj = ln.split("PICK")[1].split("PLACE")[0].strip()
                    wrong = next(g for g in goals if g != t.cube_to_bin[obj])
                    lines[i] = ln.split("PLACE")[0] + f"PLACE {wrong}"
                    break
        elif fault == "out_of_reach":
            for i, a in enumerate(t.agents):
                far = [o for o in sorted(t.objects)
                       if not t.in_reach(a, t.top_site(o, view.state))]
                if far:
                    lines[i] = f"NAME {a} ACTION PICK {far[0]} PLACE {t.cube_to_bin[far[0]]}"
                    break
        elif fault == "all_wait":
            lines = [f"NAME {a} ACTION WAIT" for a in t.agents]
        elif fault == "path_after_place":
            lines = [ln + " PATH [(0.0, 0.5, 0.5), (0.1, 0.5, 0.5)]" if "PLACE" in ln else ln
                     for ln in lines]
        elif fault == "no_execute":
            return head.replace("[Decision] EXECUTE", "[Decision] PROCEED") + \
                "I think we are ready.\n"
        return head + "EXECUTE\n" + "\n".join(lines) + "\n"


# -- the JSON plan (constrained decoding) ---------------------------------------------------
def plan_schema(task: SortTask, execute_only: bool = False) -> dict[str, Any]:
    """The JSON schema of one dialog turn for the scene: short reasons, the decision
    (EXECUTE only on the last call) and exactly one action per robot (the robots as the
    plan's keys, objects and locations as enums, RoCo's actions PICK ... PLACE ... and WAIT),
    so a grammar-bound answer is a well-formed plan by construction."""
    pick = {"type": "object", "properties": {
        "action": {"const": "PICK"}, "object": {"enum": sorted(task.objects)},
        "place": {"enum": list(task.panels)}},
        "required": ["action", "object", "place"], "additionalProperties": False}
    wait = {"type": "object", "properties": {"action": {"const": "WAIT"}},
            "required": ["action"], "additionalProperties": False}
    act = {"anyOf": [pick, wait]}
    return {"type": "object", "properties": {
        "reasons": {"type": "string", "maxLength": MAX_REASONS},
        "decision": {"enum": ["EXECUTE"] if execute_only else ["PROCEED", "EXECUTE"]},
        "plan": {"type": "object", "properties": {a: act for a in task.agents},
                 "required": list(task.agents), "additionalProperties": False}},
        "required": ["reasons", "decision", "plan"], "additionalProperties": False}


PLAN_HINT = ("\n[JSON Answer]\nAnswer with ONE JSON object and nothing else: \"reasons\" "
             "(one short sentence to the others), \"decision\" (\"PROCEED\" or \"EXECUTE\") "
             "and \"plan\": one action for every robot ({robots}), each "
             "{{\"action\": \"PICK\", \"object\": OBJECT, \"place\": LOCATION}} or "
             "{{\"action\": \"WAIT\"}}; objects: {objects}; locations: {places}. The plan "
             "is written in the [Action Output Instruction] format for you.\n")


class PlanJSONError(ProposalError):
    """A JSON plan that cannot be turned into RoCo's text (not JSON, wrong shape, a name
    not in the scene): the message goes into the dialog, then the re-plan's feedback."""


_KEYWORDS = re.compile(r"EXECUTE|PROCEED|NAME|ACTION")


def _action_text(task: SortTask, robot: str, a: Any) -> str:
    if not isinstance(a, dict):
        raise PlanJSONError(f"the JSON plan's action for {robot} is not an object")
    verb = a.get("action")
    if verb == "WAIT":
        return "WAIT"
    if verb != "PICK":
        raise PlanJSONError(f"the JSON plan's action for {robot} must be PICK or WAIT, "
                            f"not {str(verb)[:40]!r}")
    obj, place = a.get("object"), a.get("place")
    if obj not in task.objects:
        raise PlanJSONError(f"{robot}'s PICK names {str(obj)[:40]!r}, not an object of the "
                            f"scene ({', '.join(sorted(task.objects))})")
    if place not in task.panels:
        raise PlanJSONError(f"{robot}'s PLACE names {str(place)[:40]!r}, not a location of "
                            f"the scene ({', '.join(task.panels)})")
    return f"PICK {obj} PLACE {place}"


def plan_text(task: SortTask, agent: str, content: str) -> str:
    """A JSON plan answer as RoCo's response text ([Reasons] / [Proposal] / [Decision],
    then ``EXECUTE`` and one ``NAME ROBOT ACTION ...`` line per robot when the decision
    is EXECUTE); PlanJSONError, naming what is wrong, for anything else."""
    try:
        data = json.loads(json_text(content))
    except ValueError as exc:
        raise PlanJSONError(f"the answer is not a JSON plan ({exc.__class__.__name__}: "
                            f"{str(exc)[:80]}): {content.strip()[:80]!r}") from None
    if not isinstance(data, dict):
        raise PlanJSONError("the JSON plan is not an object")
    decision, plan = data.get("decision"), data.get("plan")
    if decision not in ("PROCEED", "EXECUTE"):
        raise PlanJSONError(f"the JSON plan's decision must be PROCEED or EXECUTE, not "
                            f"{str(decision)[:40]!r}")
    if not isinstance(plan, dict):
        raise PlanJSONError("the JSON plan has no \"plan\" object (one action per robot)")
    extra = [str(k)[:40] for k in plan if k not in task.agents]
    if extra:
        raise PlanJSONError(f"the JSON plan names unknown robot(s) {', '.join(extra)} "
                            f"(robots: {', '.join(task.agents)})")
    missing = [a for a in task.agents if a not in plan]
    if missing:
        raise PlanJSONError(f"the JSON plan has no action for {', '.join(missing)}")
    acts = {a: _action_text(task, a, plan[a]) for a in task.agents}
    reasons = " ".join(str(data.get("reasons") or "").split())[:MAX_REASONS]
    reasons = _KEYWORDS.sub(lambda m: m.group(0).lower(), reasons)
    text = (f"[Reasons] {reasons}\n[Proposal] {acts.get(agent, 'WAIT')}\n"
            f"[Decision] {decision}\n")
    if decision == "EXECUTE":
        text += "".join(f"NAME {a} ACTION {acts[a]}\n" for a in task.agents)
    return text


# the JSON plan's structured-output modes, in order: json_object with the schema (llama.cpp
# turns it into a grammar; no json_schema, which that server refuses), then plain text
# with the schema in the prompt (a server that refuses response_format; the answer's JSON
# is taken out of it and checked all the same)
JSON_MODES = ("json_object", "text")


def _json_request(view: AgentView, mode: str = "json_object"
                  ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The JSON plan's messages (RoCo's prompt, then the answer's shape) and its
    ``response_format`` in ``mode`` (:data:`JSON_MODES`; None in text mode)."""
    t = view.task
    hint = PLAN_HINT.format(robots=", ".join(t.agents), objects=", ".join(sorted(t.objects)),
                            places=", ".join(t.panels))
    msgs = [{"role": "system", "content": view.system + hint + view.user}]
    return with_mode(mode, msgs, DictSchema(PLAN_SCHEMA, plan_schema(t, view.last_call)))


# -- LLM-backed agents --------------------------------------------------------------------
def _messages(view: AgentView) -> list[dict[str, Any]]:
    """RoCo's one-message request: system prompt and user prompt joined."""
    return [{"role": "system", "content": view.system + view.user}]


class OpenAIAgents(DialogAgents):
    """Dialog turns answered by a model through the real ``openai`` client."""

    name = "openai"

    def __init__(self, model: str = DEFAULT_MODEL, *, base_url: str | None = None,
                 api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 max_retries: int = 2, temperature: float = 0.0, seed: int | None = 0,
                 budget: Budget | None = None, record: str | os.PathLike[str] | None = None,
                 plan_format: str = "json") -> None:
        super().__init__(budget)
        if plan_format not in PLAN_FORMATS:
            raise CellspecError(f"the plan format must be one of {', '.join(PLAN_FORMATS)}")
        self.plan_format = plan_format
        self.json_mode = JSON_MODES[0]  # the structured-output mode the server takes
        require("openai", extra="llm")  # the llm extra; says so when missing
        check_llm_limits(timeout, max_retries, temperature)
        url = server_url(base_url)
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key and is_loopback(url):
            key = "not-needed"  # a local server (llama.cpp, Ollama, vLLM) checks no key
        if not key:
            raise CellspecError("the openai adapter needs OPENAI_API_KEY for a remote server "
                                "(none is needed for a --base-url on 127.0.0.1/localhost) "
                                "or use --adapter offline")
        if record:
            check_output(str(Path(record)), "--record")
        self.model = model
        self.base_url, self.api_key = url, key
        self.timeout, self.max_retries = timeout, max_retries
        self.temperature, self.seed = temperature, seed
        self.record_path = Path(record) if record else None

    def _post(self, messages: list[dict[str, Any]], kw: dict[str, Any],
              no_retry: Any = None) -> dict[str, Any]:
        """One chat completion; an HTTP error is LLMUnavailable (``no_retry``'s refusals
        are raised as they are, for the caller's next mode)."""
        try:
            return post_chat(self.base_url, self.api_key,
                             {"model": self.model, "messages": messages,
                              "max_tokens": MAX_RESPONSE_TOKENS, **kw},
                             timeout=self.timeout, max_retries=self.max_retries,
                             no_retry=no_retry)
        except HTTPStatus as exc:
            if no_retry is not None and no_retry(exc):
                raise
            raise LLMUnavailable(f"the LLM server answered HTTP {exc.status}: "
                                 f"{exc.message[:200]}") from None

    def _post_json(self, view: AgentView, kw: dict[str, Any]
                   ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The JSON plan's request in the first of :data:`JSON_MODES` the server takes
        (kept for the run): a refusal of ``response_format`` moves to the next mode."""
        for i in range(JSON_MODES.index(self.json_mode), len(JSON_MODES)):
            mode = JSON_MODES[i]
            messages, rf = _json_request(view, mode)

            def refusal(exc: HTTPStatus, last: bool = i + 1 == len(JSON_MODES)) -> bool:
                return exc.status in (400, 422, 500) and names_response_format(exc) \
                    and not last
            try:
                obj = self._post(messages, {**kw, **({"response_format": rf} if rf else {})},
                                 no_retry=refusal)
            except HTTPStatus:
                continue  # the server refuses this response_format: the next mode
            self.json_mode = mode
            return messages, obj
        raise AssertionError("the last mode is never a refusal")  # pragma: no cover

    def respond(self, view: AgentView) -> str:
        """One dialog turn (:func:`http_chat.post_chat`: the whole call bounded by the
        timeout; a server error, time-out or a body that is not a chat completion is
        LLMUnavailable: the environment, exit 2, never a turn without a plan)."""
        self.check_budget()
        t0 = time.perf_counter()
        messages, schema = _messages(view), "dialog"
        kw: dict[str, Any] = {"temperature": self.temperature}
        if self.seed is not None:
            kw["seed"] = self.seed
        try:
            if self.plan_format == "json":
                messages, obj = self._post_json(view, kw)
                schema = PLAN_SCHEMA
            else:
                obj = self._post(messages, kw)
            resp = message_of(obj)
            if resp.pop("no_choices", False):
                raise ProposalError("the model returned no choices")
        except CellspecError as exc:
            self.record("dialog", t0, error=str(exc))
            raise
        if self.record_path is not None:
            record_exchange(self.record_path, request_hash(self.model, messages, schema, None),
                            self.model, messages, resp)
        text = _text(self, resp, t0)
        return plan_text(view.task, view.agent, text) if schema == PLAN_SCHEMA else text


def _text(ad: DialogAgents, resp: dict[str, Any], t0: float) -> str:
    """The answer text of one response record, or the reason it cannot be used."""
    u = resp.get("usage") or {}
    pt, ct = int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0)
    err = None
    if resp.get("refusal"):
        err = f"the model refused: {str(resp['refusal'])[:200]}"
    elif resp.get("finish_reason") == "length":
        err = f"the answer was cut off at {MAX_RESPONSE_TOKENS} tokens"
    elif not isinstance(resp.get("content"), str) or not resp["content"].strip():
        err = "the model returned an empty answer"
    ad.record("dialog", t0, pt, ct, error=err)
    if err:
        raise ProposalError(err)
    return resp["content"]


class ReplayAgents(DialogAgents):
    """Dialog turns answered from a JSONL cassette recorded by ``OpenAIAgents``."""

    name = "replay"

    def __init__(self, cassette: str | os.PathLike[str], model: str = DEFAULT_MODEL,
                 budget: Budget | None = None) -> None:
        super().__init__(budget)
        self.model = model
        self.entries = ReplayAdapter(cassette, model).entries
        self.path = str(cassette)

    def respond(self, view: AgentView) -> str:
        self.check_budget()
        t0 = time.perf_counter()
        # a cassette of JSON plans or of RoCo's text (recorded with either plan format)
        for mode in JSON_MODES:
            h = request_hash(self.model, _json_request(view, mode)[0], PLAN_SCHEMA, None)
            if h in self.entries:
                return plan_text(view.task, view.agent, _text(self, self.entries[h], t0))
        h = request_hash(self.model, _messages(view), "dialog", None)
        if h not in self.entries:
            raise LLMUnavailable(stale_cassette(Path(self.path), "dialog", h))
        return _text(self, self.entries[h], t0)

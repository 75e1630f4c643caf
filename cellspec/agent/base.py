"""The adapter interface: language models (or the offline translator) translate and
propose; solvers decide.

``translate(command, cell) -> str`` returns DSL text of one ``design`` statement, which
:func:`parse_spec` parses and validates with cellspec's own design parser (errors are
CellspecError with positions). ``propose(spec, cell, feedback) -> dict | None`` returns a
candidate layout JSON object (the layout format, docs/formats.md) or None (the solver builds it).
Every call is recorded per command (kind, model, tokens, latency) in frozen dataclasses.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.dsl.design import DesignBuilder, DesignSpec  # the dsl's one spec builder
from cellspec.dsl.parser import parse_text

if TYPE_CHECKING:
    from cellspec.dsl.model import Cell

SPEC_FILE = "<spec>"


class TranslateError(CellspecError):
    """The command could not be translated (exit 1 at the CLI, not a usage error)."""


class LLMUnavailable(CellspecError):
    """The LLM server cannot be reached, timed out or refused the call: an environment
    problem (exit 2 at the CLI), never a "cannot translate" answer about the command."""


class BudgetExceeded(CellspecError):
    """The per-command budget of LLM calls or tokens is used up."""


@dataclass(frozen=True)
class CallRecord:
    """One adapter call."""

    kind: str  # "translate" | "propose"
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    ok: bool = True
    error: str | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "seconds": round(self.seconds, 4),
                "ok": self.ok, "error": self.error}


@dataclass(frozen=True)
class Budget:
    """Per-command limits (None: unlimited)."""

    max_calls: int | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class Feedback:
    """The violated constraints phi(E) of the last candidate: rule, parts, message."""

    attempt: int
    violations: tuple[tuple[str, tuple[str, ...], str], ...]

    def to_json(self) -> dict[str, Any]:
        return {"attempt": self.attempt,
                "violations": [{"rule": r, "parts": list(p), "message": m}
                               for r, p, m in self.violations]}


# --- structured-output models (strict JSON schemas are generated from these) ---------

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SpecOut(_Strict):
    """What a model returns for translate: DSL text, or why it cannot translate."""

    spec: str | None
    cannot: str | None


class PartOut(_Strict):
    id: str
    type: str
    pos: list[float]


class LayoutOut(_Strict):
    """What a model returns for propose: a layout (AABB centres in metres)."""

    parts: list[PartOut]
    order: list[str] | None


class RouteOut(_Strict):
    """What a model returns at an orchestrator branch point: the next phase and why."""

    next: str
    why: str | None


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A strict JSON schema (OpenAI structured outputs): every property required,
    nullable instead of optional, no additional properties, no defaults or titles."""

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: fix(v) for k, v in node.items() if k not in ("title", "default")}
            if out.get("type") == "object" and "properties" in out:
                out["additionalProperties"] = False
                out["required"] = list(out["properties"])
            return out
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    return fix(model.model_json_schema())


class Adapter(ABC):
    """Translate and propose; record every call of the current command."""

    name = "adapter"
    model = ""
    retranslates = False  # re-ask translate with the DSL's diagnostics (models only)

    def __init__(self, budget: Budget | None = None) -> None:
        self.budget = budget or Budget()
        self.records: list[CallRecord] = []

    def reset(self) -> None:
        """Start a new command (records and budget)."""
        self.records = []

    @property
    def calls(self) -> int:
        return len(self.records)

    @property
    def tokens(self) -> int:
        return sum(r.tokens for r in self.records)

    def check_budget(self) -> None:
        b = self.budget
        if b.max_calls is not None and self.calls >= b.max_calls:
            raise BudgetExceeded(f"budget exceeded: {self.calls} LLM calls used of "
                                 f"--max-calls {b.max_calls}")
        if b.max_tokens is not None and self.tokens >= b.max_tokens:
            raise BudgetExceeded(f"budget exceeded: {self.tokens} tokens used of "
                                 f"max_tokens {b.max_tokens}")

    def record(self, kind: str, t0: float, prompt_tokens: int = 0, completion_tokens: int = 0,
               error: str | None = None) -> None:
        self.records.append(CallRecord(kind, self.model, prompt_tokens, completion_tokens,
                                       time.perf_counter() - t0, error is None, error))

    @abstractmethod
    def translate(self, command: str, cell: Cell, feedback: str | None = None) -> str:
        """DSL text of one ``design`` statement (raise TranslateError when impossible);
        ``feedback``: the DSL's diagnostics on the previous answer."""

    @abstractmethod
    def propose(self, spec: DesignSpec, cell: Cell,
                feedback: Feedback | None) -> dict[str, Any] | None:
        """A candidate layout JSON object, or None (the solver generates)."""


@dataclass(frozen=True)
class CommandRecord:
    """What one command cost: outcome, calls, tokens, repairs, latency."""

    outcome: str
    calls: tuple[CallRecord, ...] = field(default_factory=tuple)
    repairs: int = 0
    attempts: int = 0
    seconds: float = 0.0

    @property
    def tokens(self) -> int:
        return sum(c.tokens for c in self.calls)


def parse_spec(text: str, shown: str = SPEC_FILE) -> DesignSpec:
    """Parse and validate DSL text holding exactly one ``design`` statement."""
    if not isinstance(text, str) or not text.strip():
        raise CellspecError(Diagnostic(shown, 1, 1, "empty spec: expected `design NAME { ... }`"))
    model = parse_text(text, shown)
    stmts = list(getattr(model, "statements", []))
    designs = [s for s in stmts if type(s).__name__ == "Design"]
    others = [s for s in stmts if type(s).__name__ != "Design"]
    if others or len(designs) != 1:
        raise CellspecError(Diagnostic(shown, 1, 1, "a spec holds exactly one `design` "
                                       "statement and nothing else"))
    b = DesignBuilder(shown, Fraction(1))
    d = b.design(designs[0])
    b.sink.raise_if_any()
    return d

"""A fault-injecting adapter for tests: each propose call answers with one fault.

Faults: ``none`` (the solver's own layout), ``wrong_count``, ``overlap``, ``floating``,
``out_of_workspace``, ``malformed_json``, ``refusal``, ``truncated``. The answer goes
through the same parsing path as a real model's (``ChatAdapter._ask``). Translation is the
offline translator's. Deterministic for a given ``seed``.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from cellspec.agent.base import Budget, Feedback
from cellspec.agent.loop import reference
from cellspec.agent.offline import OfflineAdapter
from cellspec.agent.openai_adapter import ChatAdapter
from cellspec.dsl.design import DesignSpec

if TYPE_CHECKING:
    from cellspec.dsl.model import Cell

FAULTS = ("none", "wrong_count", "overlap", "floating", "out_of_workspace", "malformed_json",
          "refusal", "truncated")


class FaultyAdapter(ChatAdapter):
    """Proposes layouts with injected faults (cycled through ``faults``)."""

    name = "faulty"

    def __init__(self, faults: Sequence[str] = FAULTS, seed: int = 0,
                 budget: Budget | None = None) -> None:
        super().__init__("faulty", budget)
        bad = [f for f in faults if f not in FAULTS]
        if bad or not faults:
            raise ValueError(f"unknown faults {bad} (known: {', '.join(FAULTS)})")
        self.faults = tuple(faults)
        self.rng = random.Random(seed)
        self.k = 0
        self._spec: DesignSpec | None = None
        self._cell: Cell | None = None
        self.propose_mode = "always"  # a stand-in proposer: its proposals are the point

    def translate(self, command: str, cell: Cell, feedback: str | None = None) -> str:
        self.check_budget()
        t0 = time.perf_counter()
        out = OfflineAdapter().translate(command, cell)
        self.record("translate", t0)
        return out

    def propose(self, spec: DesignSpec, cell: Cell,
                feedback: Feedback | None) -> dict[str, Any] | None:
        self._spec, self._cell = spec, cell
        return super().propose(spec, cell, feedback)

    def _complete(self, kind: str, messages: list[dict[str, Any]],
                  schema: type[BaseModel], tools: list[dict[str, Any]] | None = None
                  ) -> dict[str, Any]:
        fault = self.faults[self.k % len(self.faults)]
        self.k += 1
        usage = {"prompt_tokens": 100, "completion_tokens": 50}
        ok = {"finish_reason": "stop", "refusal": None, "usage": usage}
        if fault == "refusal":
            return {**ok, "content": None, "refusal": "I can't help with that."}
        if fault == "malformed_json":
            return {**ok, "content": '{"parts": [{"id": "c1", "type": "cube", "pos": [0.4,'}
        assert self._cell is not None and self._spec is not None  # propose() set them
        ref = reference(self._cell, self._spec, 10.0).result
        parts = [dict(p, pos=list(p["pos"])) for p in (ref.layout or {"parts": []})["parts"]]
        if not parts:
            parts = [{"id": "c1", "type": "cube", "pos": [0.4, 0.2, 0.025]}]
        r = self.rng
        i = r.randrange(len(parts))
        if fault == "wrong_count":
            if len(parts) > 1 and r.random() < 0.5:
                parts.pop(i)
            else:
                parts.append(dict(parts[i], id="extra", pos=[parts[i]["pos"][0] + 0.1,
                                                             parts[i]["pos"][1], 0.025]))
        elif fault == "overlap" and len(parts) > 1:
            j = (i + 1) % len(parts)
            parts[j]["pos"] = [parts[i]["pos"][0] + r.choice([0.0, 0.01]),
                               parts[i]["pos"][1], parts[i]["pos"][2]]
        elif fault == "floating":
            parts[i]["pos"][2] += r.choice([0.02, 0.05, 0.1])
        elif fault == "out_of_workspace":
            parts[i]["pos"][0] = r.choice([0.05, 0.9, 2.0])
        content = json.dumps({"parts": [{"id": p["id"], "type": p["type"], "pos": p["pos"]}
                                        for p in parts], "order": None})
        if fault == "truncated":
            return {**ok, "content": content[: len(content) // 2], "finish_reason": "length"}
        return {**ok, "content": content}

"""JSON Schemas of the layout input and the verbs' JSON outputs (docs/formats.md), shipped
in the package: ``schema("verdict")`` is the schema of ``cellspec check --format json``."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

NAMES = ("layout", "verdict", "plan", "repair", "design", "lint", "diff", "generate")


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) named ``name`` (one of :data:`NAMES`)."""
    if name not in NAMES:
        raise ValueError(f"no schema {name!r}; known: {', '.join(NAMES)}")
    text = resources.files(__name__).joinpath(f"{name}.json").read_text(encoding="utf-8")
    return json.loads(text)

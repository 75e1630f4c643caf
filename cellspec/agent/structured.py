"""Structured output, negotiated with the server: the modes (strict ``json_schema``,
``json_object`` with the schema, plain text), the request of each mode, how a refusal of
``response_format`` is recognised, and how JSON is taken out of a plain-text answer."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlparse

from pydantic import BaseModel

from cellspec.agent.base import strict_schema

MODES = ("json_schema", "json_object", "text")  # structured output, strictest first
FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.S)


def json_text(content: str) -> str:
    """The JSON in a model answer: as is, else inside a code fence, else from the first
    '{' to the last '}' (plain-text mode: models wrap JSON in prose or fences)."""
    s = content.strip()
    if s.startswith(("{", "[")):
        return s
    m = FENCE.search(s)
    if m:
        return m.group(1).strip()
    a, b = s.find("{"), s.rfind("}")
    return s[a:b + 1] if 0 <= a < b else s


def names_response_format(exc: Any) -> bool:
    """Whether an HTTP error from the server is a refusal of ``response_format``."""
    blob = " ".join(str(x) for x in (getattr(exc, "message", ""), getattr(exc, "body", ""),
                                     getattr(getattr(exc, "response", None), "text", "")))
    return "response_format" in blob


def is_loopback(url: str | None) -> bool:
    """Whether ``url`` names this machine (no API key is needed there)."""
    host = (urlparse(url).hostname or "") if url else ""
    return host in ("localhost", "::1") or host.startswith("127.")


class DictSchema:
    """A JSON schema built at run time (the design language's, :mod:`spec_schema`), used
    where a pydantic model is elsewhere: ``__name__`` names it in the request and the
    cassette key; ``prompted``: the schema is described in the prompt already, so
    ``json_object`` mode (the server enforces it) does not append it."""

    def __init__(self, name: str, schema: dict[str, Any], prompted: bool = True) -> None:
        self.__name__ = name
        self.schema = schema
        self.prompted = prompted


def schema_dict(schema: type[BaseModel] | DictSchema) -> dict[str, Any]:
    """The strict JSON schema of a pydantic model or a :class:`DictSchema`."""
    return schema.schema if isinstance(schema, DictSchema) else strict_schema(schema)


def with_mode(mode: str, messages: list[dict[str, Any]],
              schema: type[BaseModel] | DictSchema
              ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The messages and ``response_format`` of one structured-output mode: strict
    ``json_schema``; ``json_object`` with the schema (llama.cpp's form, enforced by a
    grammar there) and the schema in the prompt unless the prompt describes it already;
    plain text with the schema in the prompt (the answer is validated)."""
    sch = schema_dict(schema)
    if mode == "json_schema":
        return messages, {"type": "json_schema", "json_schema": {
            "name": schema.__name__, "strict": True, "schema": sch}}
    msgs = [dict(m) for m in messages]
    if not (mode == "json_object" and isinstance(schema, DictSchema) and schema.prompted):
        hint = ("\nAnswer with ONE JSON object, no prose, matching this JSON schema: "
                + json.dumps(sch, sort_keys=True))
        if msgs and msgs[0].get("role") == "system":
            msgs[0]["content"] = str(msgs[0]["content"]) + hint
        else:
            msgs.insert(0, {"role": "system", "content": hint.strip()})
    if mode == "json_object":
        return msgs, {"type": "json_object", "schema": sch}
    return msgs, None

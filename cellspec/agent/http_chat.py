"""One chat-completion request to an OpenAI-compatible server, bounded as a whole.

The standard library's ``http.client`` with one deadline for the whole call (connect,
send, every read of the status line, headers and body, and the retries with their
back-off): a server that trickles one byte a second or never answers ends the call at the
deadline, not after one read time-out per byte. The body is read up to
:data:`MAX_RESPONSE_BYTES`; a body that is not JSON, not UTF-8 or not ``application/json``
(an HTML error page with status 200) is an :class:`~cellspec.agent.base.LLMUnavailable`
naming what the server sent. 429 and 5xx answers (except a refusal of the request's
``response_format``, which the caller negotiates) are retried with back-off within the
deadline.
"""

from __future__ import annotations

import http.client
import json
import time
from typing import Any
from urllib.parse import urlparse

from cellspec.agent.base import LLMUnavailable

MAX_RESPONSE_BYTES = 8 * 1024 * 1024  # a chat answer; more is a server gone wrong
MAX_ERROR_BYTES = 64 * 1024  # the part of an error body kept for its message
CHUNK = 65536
DEFAULT_BASE = "https://api.openai.com/v1"


class HTTPStatus(Exception):
    """A non-2xx answer: the status and the start of the body (for the message)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}")
        self.status, self.text = status, text
        self.body = text  # what structured.names_response_format reads

    @property
    def message(self) -> str:
        """The server's error message when the body is OpenAI-style JSON, else the text."""
        try:
            obj = json.loads(self.text)
            err = obj.get("error") if isinstance(obj, dict) else None
            msg = err.get("message") if isinstance(err, dict) else err
            if isinstance(msg, str):
                return msg
        except ValueError:
            pass
        return self.text


def _describe(body: bytes, ctype: str) -> str:
    """What the server sent, in a few words (for an error message)."""
    head = body[:60]
    try:
        shown = head.decode("utf-8")
    except UnicodeDecodeError:
        shown = head.decode("latin-1")
    shown = " ".join(shown.split())[:60]
    return f"{len(body)} bytes of {ctype or 'no content type'}" + (f": {shown!r}" if shown
                                                                      else "")


class Deadline:
    """A monotonic deadline; ``left()`` raises LLMUnavailable once it has passed."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        t = self.end - time.monotonic()
        if t <= 0:
            raise LLMUnavailable(f"the LLM call timed out (--timeout {self.seconds:g} s for "
                                 "the whole call)")
        return t


def _chunk(resp: http.client.HTTPResponse, sock: Any, dl: Deadline) -> bytes:
    """The next piece of the body (b"" at its end), the read bounded by what is left of the
    deadline (LLMUnavailable when it passes)."""
    if sock is not None:
        sock.settimeout(dl.left())
    try:
        return resp.read1(CHUNK)
    except TimeoutError:
        dl.left()
        raise LLMUnavailable("the LLM call timed out") from None


def _read_body(resp: http.client.HTTPResponse, sock: Any, dl: Deadline, cap: int) -> bytes:
    """The body, read in chunks, each read bounded by what is left of the deadline."""
    out = bytearray()
    while True:
        chunk = _chunk(resp, sock, dl)
        if not chunk:
            return bytes(out)
        out += chunk
        if len(out) > cap:
            raise LLMUnavailable(f"the LLM server's answer is larger than {cap // 1024**2} MiB "
                                 "(read up to that cap)")
        dl.left()


def _sse(resp: http.client.HTTPResponse, sock: Any, dl: Deadline, cap: int,
         on_chunk: Any) -> dict[str, Any]:
    """A streamed chat completion (server-sent events) assembled into one completion
    object; every read bounded by the deadline, the whole stream by ``cap`` bytes;
    ``on_chunk(n)``: called with the number of content chunks so far (progress)."""
    content: list[str] = []
    finish = refusal = None
    usage: dict[str, Any] = {}
    n = size = 0
    buf = b""
    while True:
        chunk = _chunk(resp, sock, dl)
        if not chunk:
            break
        size += len(chunk)
        if size > cap:
            raise LLMUnavailable(f"the LLM server's answer is larger than {cap // 1024**2} MiB "
                                 "(read up to that cap)")
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for raw in lines:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                buf = b""
                break
            try:
                ev = json.loads(data.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                raise LLMUnavailable("the LLM server's stream carries an event that is not "
                                     f"UTF-8 JSON ({_describe(data, 'text/event-stream')})"
                                     ) from None
            if not isinstance(ev, dict):
                continue
            if isinstance(ev.get("usage"), dict):
                usage = ev["usage"]
            for ch in ev.get("choices") or []:
                if not isinstance(ch, dict):
                    continue
                d = ch.get("delta")
                delta: dict[str, Any] = d if isinstance(d, dict) else {}
                if isinstance(delta.get("content"), str):
                    content.append(delta["content"])
                    n += 1
                    if on_chunk is not None:
                        on_chunk(n)
                if delta.get("refusal"):
                    refusal = delta["refusal"]
                if ch.get("finish_reason"):
                    finish = ch["finish_reason"]
        dl.left()
    if n == 0 and finish is None and refusal is None:  # llama-cpp-python's server ends a
        # stream this way when another request interrupts it (interrupt_requests)
        raise LLMUnavailable("the LLM server ended the stream without an answer (interrupted "
                             "by another request?)")
    if not usage:
        usage = {"prompt_tokens": 0, "completion_tokens": n, "estimated": True}
    return {"choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": "".join(content),
                                     "refusal": refusal}}], "usage": usage}


def _once(url: str, body: bytes, headers: dict[str, str], dl: Deadline, cap: int,
          on_chunk: Any = None) -> dict[str, Any]:
    """One POST; the decoded JSON object, or HTTPStatus / LLMUnavailable."""
    u = urlparse(url)
    cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    conn = cls(u.hostname or "localhost", u.port, timeout=dl.left())
    try:
        try:
            conn.connect()
            conn.sock.settimeout(dl.left())
            path = (u.path or "/") + (f"?{u.query}" if u.query else "")
            conn.request("POST", path, body=body, headers=headers)
            resp = conn.getresponse()
            ctype = (resp.getheader("content-type") or "").split(";")[0].strip().lower()
            if resp.status < 300 and ctype == "text/event-stream":
                return _sse(resp, conn.sock, dl, cap, on_chunk)
            data = _read_body(resp, conn.sock, dl, cap if resp.status < 300
                              else MAX_ERROR_BYTES * 16)
        except TimeoutError:
            dl.left()
            raise LLMUnavailable("the LLM call timed out") from None
        except (OSError, http.client.HTTPException) as exc:
            if isinstance(exc, http.client.HTTPException) and not isinstance(
                    exc, http.client.RemoteDisconnected):
                raise LLMUnavailable(f"the LLM server sent a malformed HTTP answer "
                                     f"({type(exc).__name__})") from None
            raise LLMUnavailable(f"cannot reach the LLM server at {u.scheme}://{u.netloc}: "
                                 f"{getattr(exc, 'strerror', None) or exc}") from None
        if resp.status >= 300:
            raise HTTPStatus(resp.status, data[:MAX_ERROR_BYTES].decode("utf-8", "replace"))
        if ctype and ctype != "application/json":
            raise LLMUnavailable(f"the LLM server answered HTTP {resp.status} with "
                                 f"{_describe(data, ctype)}, not JSON (is --base-url an "
                                 "OpenAI-compatible /v1 endpoint?)")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise LLMUnavailable(f"the LLM server's answer is not UTF-8 text "
                                 f"({_describe(data, ctype)})") from None
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            raise LLMUnavailable(f"the LLM server's answer is not JSON "
                                 f"({_describe(data, ctype)})") from None
        if not isinstance(obj, dict):
            raise LLMUnavailable("the LLM server's answer is not a JSON object")
        return obj
    finally:
        conn.close()


def post_chat(base_url: str | None, api_key: str, payload: dict[str, Any], *,
              timeout: float, max_retries: int, cap: int = MAX_RESPONSE_BYTES,
              no_retry: Any = None, on_chunk: Any = None) -> dict[str, Any]:
    """POST ``payload`` to ``{base_url}/chat/completions``: the response object. The whole
    call, retries included, ends within ``timeout`` seconds. ``no_retry(HTTPStatus)``: a
    status the caller handles itself (raised at once). HTTPStatus when the last try was
    refused; LLMUnavailable for time-outs, unreachable servers and bodies that are not a
    JSON object. A streamed answer (``"stream": true`` in the payload, answered with
    server-sent events) is assembled into the same object; a server that cannot stream
    may answer with plain JSON."""
    url = (base_url or DEFAULT_BASE).rstrip("/") + "/chat/completions"
    body = json.dumps(payload).encode("utf-8")
    headers = {"content-type": "application/json", "accept": "application/json",
               "authorization": f"Bearer {api_key}"}
    dl = Deadline(timeout)
    for attempt in range(max_retries + 1):
        try:
            return _once(url, body, headers, dl, cap, on_chunk)
        except HTTPStatus as exc:
            if no_retry is not None and no_retry(exc):
                raise
            if exc.status != 429 and exc.status < 500 or attempt == max_retries:
                raise
        except LLMUnavailable as exc:
            if "cannot reach" not in str(exc) or attempt == max_retries:
                raise
        time.sleep(min(0.5 * 2 ** attempt, max(0.0, dl.left() - 0.01)))
    raise AssertionError("unreachable")  # the loop returns or raises


def message_of(obj: dict[str, Any]) -> dict[str, Any]:
    """The response record of a chat completion object: {"content", "finish_reason",
    "refusal", "usage", "tool_calls"?}; LLMUnavailable when it is not one."""
    choices = obj.get("choices")
    if not isinstance(choices, list):
        raise LLMUnavailable("the LLM server's answer has no choices (not a chat completion)")
    if not choices:
        return {"content": None, "finish_reason": None, "refusal": None, "usage": {},
                "no_choices": True}
    ch = choices[0] if isinstance(choices[0], dict) else {}
    m, u = ch.get("message"), obj.get("usage")
    msg: dict[str, Any] = m if isinstance(m, dict) else {}
    usage: dict[str, Any] = u if isinstance(u, dict) else {}
    resp: dict[str, Any] = {
        "content": msg.get("content") if isinstance(msg.get("content"), str) else None,
        "finish_reason": ch.get("finish_reason"), "refusal": msg.get("refusal"),
        "usage": {"prompt_tokens": usage.get("prompt_tokens", 0),
                  "completion_tokens": usage.get("completion_tokens", 0)}}
    calls = msg.get("tool_calls")
    if isinstance(calls, list) and calls:
        out = []
        for c in calls:
            f = c.get("function") if isinstance(c, dict) else None
            if isinstance(f, dict):
                out.append({"id": c.get("id"), "name": f.get("name"),
                            "arguments": f.get("arguments")})
        if out:
            resp["tool_calls"] = out
    return resp

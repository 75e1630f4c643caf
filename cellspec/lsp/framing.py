"""The stdio message loop of ``cellspec lsp``, bounded and self-healing (issue 31).

pygls's loop reads ``Content-Length`` bytes whatever they are (99 999 999 999 killed the
server), ignores a header it cannot parse (``-5``, ``abc``) and then reads the next
message's body as headers (the server was wedged), and drops a request whose params do
not fit the method's types without answering it (the client waited forever). Here:

- a header line is read at most :data:`MAX_HEADER_LINE` bytes at a time;
- a body over :data:`MAX_MESSAGE_BYTES`, or a header without a valid length, is
  skipped: the loop logs it and resynchronises on the next ``Content-Length:`` line (a
  body with no line end ends where the next header starts), reading in bounded pieces;
- a request (it has an ``id``) that cannot be decoded or typed gets a JSON-RPC error
  response (-32700 parse error, -32602 invalid params).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import threading
from typing import Any, BinaryIO

from lsprotocol.types import ResponseError, ResponseErrorMessage
from pygls.exceptions import JsonRpcException
from pygls.io_ import StdoutWriter

MAX_HEADER_LINE = 8 * 1024
MAX_MESSAGE_BYTES = 32 * 1024 * 1024  # an 8 MiB document, JSON-escaped, fits
_CHUNK = 1 << 20
_LENGTH = re.compile(rb"Content-Length:[ \t]*(\S*)[ \t]*\r?\n$", re.IGNORECASE)
log = logging.getLogger("cellspec.lsp")


class Framer:
    """Reads LSP frames from a binary stream (blocking; run in a thread)."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def _line(self) -> bytes:
        """One header line, at most MAX_HEADER_LINE bytes (a longer one comes in pieces;
        the end of the previous piece is kept so a header split between two is found)."""
        return self.stream.readline(MAX_HEADER_LINE)

    def next_body(self) -> bytes | None:
        """The next well-framed message body (None at end of input); malformed or
        oversized frames are logged and skipped."""
        length: int | None = None
        tail = b""
        while True:
            piece = self._line()
            if not piece:
                return None
            line, continued = tail + piece, bool(tail)
            tail = b"" if piece.endswith(b"\n") else line[-64:]
            m = _LENGTH.search(line)
            if m is not None:
                raw = m.group(1)
                length = int(raw) if raw.isdigit() else None
                if length is None or length > MAX_MESSAGE_BYTES:
                    why = (f"Content-Length {raw.decode('latin-1')[:40]!r} is not a "
                           "byte count" if length is None else
                           f"Content-Length {length} is over the limit of "
                           f"{MAX_MESSAGE_BYTES} bytes")
                    # resynchronise: read on, a line at a time, up to the next message's
                    # own Content-Length line (a body with no line end is glued to it)
                    log.error("cellspec lsp: skipped a message: %s", why)
                    length = None
                continue
            if piece in (b"\r\n", b"\n") and not continued and length is not None:
                return self._read(length)
            # another header (Content-Type), or the remains of a skipped body: read on

    def _read(self, n: int) -> bytes:
        parts, left = [], n
        while left > 0:
            b = self.stream.read(min(_CHUNK, left))
            if not b:
                break
            parts.append(b)
            left -= len(b)
        return b"".join(parts)


def _error_response(protocol: Any, msg_id: Any, code: int, message: str) -> None:
    protocol._send_data(ResponseErrorMessage(id=msg_id, error=ResponseError(
        code=code, message=message)))


def handle_body(protocol: Any, body: bytes) -> None:
    """Decode one body and hand it to pygls; a request that cannot be decoded or typed
    gets an error response instead of silence."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        log.error("cellspec lsp: a message is not JSON: %s", exc)
        _error_response(protocol, None, -32700, f"parse error: {exc}")
        return
    msg_id = data.get("id") if isinstance(data, dict) else None
    is_request = isinstance(data, dict) and "method" in data and msg_id is not None
    if not isinstance(data, dict):
        log.error("cellspec lsp: a message is not a JSON object")
        return
    try:
        # as pygls's object_hook: only the message object itself is structured
        message = protocol.structure_message(data)
    except JsonRpcException as exc:
        log.error("cellspec lsp: cannot decode %s: %s", data.get("method"), exc)
        if is_request:
            cause = exc.__cause__
            detail = f": {str(cause).splitlines()[0]}" if cause is not None and str(cause) \
                else ""
            _error_response(protocol, msg_id, exc.code,
                            f"invalid params for {data.get('method')}{detail}")
        return
    except Exception as exc:  # noqa: BLE001 - a client's garbage must not stop the loop
        log.error("cellspec lsp: cannot decode a message: %s", exc)
        if is_request:
            _error_response(protocol, msg_id, -32602,
                            f"invalid params for {data.get('method')}: {exc}")
        return
    try:
        protocol.handle_message(message)
    except Exception:  # noqa: BLE001 - as pygls: log and go on
        log.exception("cellspec lsp: unable to handle a message")


async def run(stop: threading.Event, stdin: BinaryIO, protocol: Any) -> None:
    """The message loop: frames read in a thread, handled on the event loop."""
    loop = asyncio.get_running_loop()
    framer = Framer(stdin)
    while not stop.is_set():
        body = await loop.run_in_executor(None, framer.next_body)
        if body is None:
            break
        handle_body(protocol, body)


def start_io(server: Any, stdin: BinaryIO | None = None,
             stdout: BinaryIO | None = None) -> None:
    """pygls's ``start_io`` with this loop (see the module docstring)."""
    server._stop_event = stop = threading.Event()
    server.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
    try:
        asyncio.run(run(stop, stdin or sys.stdin.buffer, server.protocol))
    except BrokenPipeError:
        log.error("cellspec lsp: the connection to the client is lost; shutting down")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()

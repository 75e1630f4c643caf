"""Model servers that misbehave (issue 31), stood in for by a raw socket server on
127.0.0.1 started here: a body that is not UTF-8, an HTML page with 200, a server that
trickles a byte at a time or never answers, an endless body. ``design`` and ``dialog``
exit 2 naming what the server sent, within the per-call limit, reading up to a cap."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from pathlib import Path

import pytest

from cellspec.agent.base import LLMUnavailable
from cellspec.agent.http_chat import post_chat
from cellspec.cli import main

ROOT = Path(__file__).resolve().parents[1]
CELL = str(ROOT / "rules" / "cells" / "dual_arm_station.cell")
SORT = ROOT / "rules" / "cells" / "sort_cubes.cell"


class RawServer:
    """Answers every request with ``self.mode``: utf8 | html | trickle | silent | endless."""

    def __init__(self) -> None:
        self.mode = "html"
        self.stop = threading.Event()
        outer = self

        class H(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock = self.request
                sock.settimeout(5)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        data += sock.recv(65536)
                    head, body = data.split(b"\r\n\r\n", 1)
                    n = next((int(x.split(b":")[1]) for x in head.split(b"\r\n")
                              if x.lower().startswith(b"content-length")), 0)
                    while len(body) < n:
                        body += sock.recv(65536)
                    outer.answer(sock)
                except OSError:
                    pass

        self.srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        self.thread = threading.Thread(target=self.srv.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/v1"

    def answer(self, sock: socket.socket) -> None:
        m = self.mode
        if m == "utf8":
            body = b'{"choices": [{"message": {"content": "\xff\xfe tower"}}]}'
            sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n" % len(body) + body)
        elif m == "html":
            body = b"<html><body>Welcome to nginx!</body></html>"
            sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n"
                         b"content-length: %d\r\n\r\n" % len(body) + body)
        elif m == "trickle":
            sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: 100000\r\n\r\n")
            while not self.stop.wait(0.25):
                sock.sendall(b" ")
        elif m == "silent":
            self.stop.wait(30)
        elif m == "empty_stream":
            sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"connection: close\r\n\r\n")
        elif m == "endless":
            sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n")
            chunk = b" " * 65536
            while not self.stop.is_set():
                sock.sendall(chunk)

    def close(self) -> None:
        self.stop.set()
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def raw():
    s = RawServer()
    yield s
    s.close()


@pytest.mark.parametrize(("mode", "said"), [
    ("utf8", "not UTF-8 text (51 bytes of application/json"),
    ("html", "HTTP 200 with 43 bytes of text/html: '<html><body>Welcome to nginx!"),
])
def test_design_names_what_the_server_sent(raw, capsys, monkeypatch, mode, said):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    raw.mode = mode
    rc = main(["design", "a tower", "--cell", CELL, "--model", "m", "--base-url", raw.url,
               "--retries", "0", "--translate", "model"])
    err = capsys.readouterr().err
    assert rc == 2 and said in err and "Traceback" not in err


@pytest.mark.parametrize("mode", ["trickle", "silent"])
def test_a_per_call_limit_bounds_the_whole_call(raw, capsys, monkeypatch, mode):
    """A byte every 0.25 s (each read returns in time) or nothing at all: a 1 s limit
    ends the call after about a second, retries included; at the CLI exit 2."""
    import cellspec
    from cellspec.agent.openai_adapter import OpenAIAdapter

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    raw.mode = mode
    a = OpenAIAdapter("m", base_url=raw.url, timeout=1.0, max_retries=2)
    a.translate_mode = "model"
    cell = cellspec.load_cell(CELL)
    t0 = time.perf_counter()
    with pytest.raises(LLMUnavailable, match=r"timed out \(--timeout 1 s for the whole"):
        a.translate("a tower", cell)
    assert time.perf_counter() - t0 < 1.6
    rc = main(["design", "a tower", "--cell", CELL, "--model", "m", "--base-url", raw.url,
               "--timeout", "1", "--retries", "2", "--translate", "model"])
    assert rc == 2 and "timed out (--timeout 1 s for the whole call)" in capsys.readouterr().err


def test_an_endless_body_is_read_up_to_the_cap(raw):
    raw.mode = "endless"
    with pytest.raises(LLMUnavailable, match="larger than 1 MiB"):
        post_chat(raw.url, "k", {"model": "m"}, timeout=20, max_retries=0, cap=1024 * 1024)


def test_nothing_listening_is_one_error(capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    rc = main(["design", "a tower", "--cell", CELL, "--model", "m", "--base-url",
               f"http://127.0.0.1:{port}/v1", "--retries", "0", "--translate", "model"])
    assert rc == 2 and "cannot reach the LLM server" in capsys.readouterr().err


def test_dialog_names_the_server_and_needs_no_key_for_loopback(raw, capsys, monkeypatch):
    pytest.importorskip("pybullet")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    raw.mode = "html"
    rc = main(["dialog", str(SORT), "--adapter", "openai", "--base-url", raw.url,
               "--retries", "0", "--rounds", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and "text/html" in err and "OPENAI_API_KEY" not in err


def test_dialog_has_a_whole_verb_time_limit(raw, capsys, monkeypatch):
    """--time-limit 2 on a silent server whose per-call limit is 30 s: unknown at ~2 s."""
    pytest.importorskip("pybullet")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    raw.mode = "silent"
    t0 = time.perf_counter()
    rc = main(["dialog", str(SORT), "--adapter", "openai", "--base-url", raw.url,
               "--timeout", "30", "--time-limit", "2", "--format", "json"])
    dt = time.perf_counter() - t0
    out = json.loads(capsys.readouterr().out)
    assert rc == 2 and out["outcome"] == "unknown" and out["reason_code"] == "time limit"
    assert dt < 4.5


def test_a_stream_that_ends_without_an_answer_is_the_server(raw, monkeypatch):
    """llama-cpp-python's server ends a stream with no chunk when another request
    interrupts it: a server failure (exit 2), not an empty model answer."""
    raw.mode = "empty_stream"
    with pytest.raises(LLMUnavailable, match="ended the stream without an answer"):
        post_chat(raw.url, "k", {"model": "m", "stream": True}, timeout=5, max_retries=0)

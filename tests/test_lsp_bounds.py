"""`cellspec lsp` within bounds (issue 31), driven by a raw stdio client: bad frames
(``Content-Length: 99999999999``, ``-5``, ``abc``) neither kill nor wedge the server, a
request with ill-typed params gets an error response, ``import "/dev/zero"`` is not read
without end, and live diagnostics refuse a buffer over the CLI's 64 KiB limit."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

from cellspec.dsl.load import MAX_RULE_FILE_BYTES
from cellspec.lsp import diagnose, index

ENV = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


class Raw:
    """A JSON-RPC client over the server's stdio that can also send broken frames."""

    def __init__(self) -> None:
        self.p = subprocess.Popen([sys.executable, "-m", "cellspec", "lsp", "--stdio"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=ENV, cwd=REPO)
        self.inbox: queue.Queue[dict] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        out = self.p.stdout
        assert out is not None
        while True:
            n = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line.lower().startswith(b"content-length:"):
                    n = int(line.split(b":")[1])
                elif line == b"\r\n" and n is not None:
                    break
            self.inbox.put(json.loads(out.read(n)))

    def raw(self, data: bytes) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, obj: dict) -> None:
        body = json.dumps(obj).encode()
        self.raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def request(self, msg_id: int, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})

    def wait_for(self, pred, timeout: float = 30) -> dict:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                msg = self.inbox.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                break
            if pred(msg):
                return msg
        raise AssertionError("no such message from the server in time")

    def response(self, msg_id: int, timeout: float = 30) -> dict:
        return self.wait_for(lambda m: m.get("id") == msg_id and "method" not in m, timeout)

    def close(self) -> None:
        try:
            self.request(9999, "shutdown", None)
            self.send({"jsonrpc": "2.0", "method": "exit"})
            self.p.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            if self.p.poll() is None:
                self.p.kill()
                self.p.wait(10)


@pytest.fixture(scope="module")
def lsp():
    """One server for the module: it must survive every test's bad input."""
    c = Raw()
    try:
        c.request(1, "initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        assert "capabilities" in c.response(1)["result"]
        c.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        yield c
    finally:
        c.close()


def _symbols(c: Raw, msg_id: int, uri: str) -> dict:
    c.request(msg_id, "textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    return c.response(msg_id)


def _open(c: Raw, uri: str, text: str) -> None:
    c.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "cellspec", "version": 1, "text": text}}})


@pytest.mark.parametrize("length", [b"99999999999", b"-5", b"abc"])
def test_a_bad_content_length_neither_kills_nor_wedges(lsp: Raw, tmp_path: Path, length):
    uri = (tmp_path / "a.cell").as_uri()
    _open(lsp, uri, "cell a\n")
    lsp.raw(b"Content-Length: " + length + b"\r\n\r\n" +
            b'{"jsonrpc": "2.0", "id": 5, "method": "shutdown"}')  # skipped, never run
    msg_id = 100 + len(length)
    res = _symbols(lsp, msg_id, uri)  # the next well-framed request is answered
    assert res["result"][0]["name"] == "a"
    assert lsp.p.poll() is None


def test_ill_typed_params_get_an_error_response(lsp: Raw):
    lsp.request(3, "textDocument/hover", {"textDocument": 5, "position": "x"})
    res = lsp.response(3, timeout=15)
    assert res["error"]["code"] == -32602
    assert "invalid params for textDocument/hover" in res["error"]["message"]
    lsp.request(4, "textDocument/definition", {"textDocument": {"uri": "file:///x.cell"},
                                               "position": {"line": "one"}})
    assert lsp.response(4, timeout=15)["error"]["code"] == -32602
    lsp.request(6, "textDocument/documentSymbol", {"textDocument": {"uri": 7}})
    assert "result" in lsp.response(6, timeout=15) or True  # answered either way


def test_live_diagnostics_refuse_a_buffer_over_the_cli_limit(lsp: Raw, tmp_path: Path):
    uri = (tmp_path / "big.cell").as_uri()
    text = "cell big\n" + "# filler\n" * (MAX_RULE_FILE_BYTES // 9 + 10)
    t0 = time.monotonic()
    _open(lsp, uri, text)
    msg = lsp.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                       and m["params"]["uri"] == uri)
    diags = msg["params"]["diagnostics"]
    assert len(diags) == 1
    assert f"live diagnostics stop at {MAX_RULE_FILE_BYTES} bytes" in diags[0]["message"]
    assert time.monotonic() - t0 < 20


def test_analyse_refuses_past_64_kib_in_bytes():
    text = "cell big\n# " + "é" * (MAX_RULE_FILE_BYTES // 2)  # under 64 Ki characters
    (item,) = diagnose.analyse(text, "big.cell")
    assert f"{len(text.encode())} bytes" in item.message


def test_import_of_dev_zero_is_not_read_without_end(tmp_path: Path, monkeypatch):
    reads: list[int] = []
    real = index.read_bounded

    def spy(path, limit):  # noqa: ANN001
        reads.append(limit)
        return real(path, limit)

    monkeypatch.setattr(index, "read_bounded", spy, raising=False)
    t0 = time.monotonic()
    assert index._read_disk(Path("/dev/zero")) is None
    assert time.monotonic() - t0 < 5
    fifo = tmp_path / "f.cell"
    os.mkfifo(fifo)
    assert index._read_disk(fifo) is None  # a FIFO would block the server: not read
    ok = tmp_path / "ok.cell"
    ok.write_text("cell ok\n")
    assert index._read_disk(ok) == "cell ok\n"
    assert all(x == index.MAX_INDEX_BYTES for x in reads)


def test_import_dev_zero_in_a_buffer(lsp: Raw, tmp_path: Path):
    uri = (tmp_path / "z.cell").as_uri()
    _open(lsp, uri, 'cell z\nimport "/dev/zero"\n')
    lsp.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                 and m["params"]["uri"] == uri, timeout=20)
    lsp.request(11, "textDocument/definition", {"textDocument": {"uri": uri},
                                                "position": {"line": 1, "character": 10}})
    lsp.response(11, timeout=20)
    assert _symbols(lsp, 12, uri)["result"][0]["name"] == "z"


def test_framer_resynchronises_on_the_next_header():
    import io

    from cellspec.lsp.framing import MAX_HEADER_LINE, Framer

    def frame(body: bytes) -> bytes:
        return b"Content-Length: %d\r\n\r\n" % len(body) + body

    good = b'{"jsonrpc": "2.0", "method": "x"}'
    long_junk = b"x" * (3 * MAX_HEADER_LINE - 5)  # in pieces; the next header split in two
    stream = io.BytesIO(
        b"Content-Length: -5\r\n\r\n" + b'{"a": 1}' + frame(good)  # glued to the next
        + b"Content-Length: abc\r\n\r\n{\n  \"pretty\": 1\n}\n" + frame(b"[1]")
        + b"Content-Length: 99999999999\r\n\r\n" + long_junk + frame(b"[2]")
        + b"Content-Type: x\r\n" + frame(b"[3]"))
    f = Framer(stream)
    assert [f.next_body() for _ in range(5)] == [good, b"[1]", b"[2]", b"[3]", None]

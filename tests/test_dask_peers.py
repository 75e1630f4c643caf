"""Scheduler addresses that are no Dask scheduler (issue 31): a local socket that sends
garbage (Dask read a frame length of exabytes: "out of memory" and a traceback) or accepts
and stays silent (batch and test hung 300 s+) is bad input within --connect-timeout."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import pytest
from conftest import REPO, STATION, loopback_server

from cellspec.cli import main

pytest.importorskip("distributed")

LAYOUT = REPO / "rules" / "world" / "tower_row.json"
RULES = REPO / "rules" / "cells" / "sort_cubes.cell"


@contextlib.contextmanager
def peer(mode: str) -> Iterator[str]:
    """A TCP peer on 127.0.0.1: ``garbage`` sends 0xff bytes, ``silent`` says nothing,
    ``close`` hangs up at once. Yields its tcp:// address."""
    def on_accept(c: socket.socket) -> None:
        if mode == "close":
            c.close()
        elif mode == "garbage":
            with contextlib.suppress(OSError):
                c.sendall(b"\xff" * 4096)

    with loopback_server(on_accept) as port:
        yield f"tcp://127.0.0.1:{port}"


def _run(capsys, args: list[str]) -> tuple[int, str, float]:
    t0 = time.monotonic()
    rc = main(args)
    took = time.monotonic() - t0
    return rc, capsys.readouterr().err, took


@pytest.mark.parametrize("verb", ["batch", "test"])
@pytest.mark.parametrize(("mode", "says"), [
    ("garbage", "the peer is not a Dask scheduler (its first message claims "
                "18446744073709551615 bytes"),
    ("silent", "it accepted the connection but sent no Dask handshake within 1 s "
               "(--connect-timeout)"),
    ("close", "the peer closed the connection"),
])
def test_a_peer_that_is_no_scheduler_is_bad_input_in_time(capsys, verb, mode, says):
    with peer(mode) as addr:
        args = (["batch", str(STATION), str(LAYOUT)] if verb == "batch" else
                ["test", str(RULES)]) + ["--scheduler", addr, "--connect-timeout", "1"]
        rc, err, took = _run(capsys, args)
    assert rc == 2, err
    assert f"cannot use the Dask scheduler at {addr}: {says}" in err
    assert "Traceback" not in err
    assert took < 8, took  # main: garbage 13 s with a traceback, silent 300 s+


def test_nothing_listening_is_bad_input(capsys):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    rc, err, took = _run(capsys, ["batch", str(STATION), str(LAYOUT), "--scheduler",
                                  f"tcp://127.0.0.1:{port}", "--connect-timeout", "1"])
    assert rc == 2 and "Connection refused" in err and took < 8

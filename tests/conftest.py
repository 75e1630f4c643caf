"""Shared fixtures: repository paths, loaded cells and a CLI runner."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
STATION = REPO / "rules" / "cells" / "dual_arm_station.cell"
FEATURES = DATA / "features.cell"
LAYOUTS = REPO / "rules" / "layouts"


_TERMINATED = False  # set by SIGTERM: an in-process CLI call that caught it re-raises


def _child_pids() -> list[int]:
    """This process's direct children (Linux /proc; none elsewhere)."""
    pids: list[int] = []
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children", encoding="ascii") as fh:
                pids += [int(x) for x in fh.read().split()]
    except OSError:
        pass
    return pids


def _stop_on_sigterm(config: pytest.Config) -> None:
    """SIGTERM ends the test run as Ctrl-C does (KeyboardInterrupt): pytest then tears its
    fixtures down, so the servers they started (the Dask cluster of test_batch_dask, the
    review server) are stopped instead of left running with parent 1. The xdist controller
    passes the signal on to its workers first (they run the tests and own the fixtures). A
    process forked from a test (a verb's worker) keeps the default: SIGTERM ends it."""
    owner = os.getpid()
    controller = getattr(config.option, "numprocesses", None) and \
        "PYTEST_XDIST_WORKER" not in os.environ

    def handler(signum: int, frame: object) -> None:
        global _TERMINATED
        if os.getpid() != owner:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        _TERMINATED = True
        if controller:
            for pid in _child_pids():
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass
        raise KeyboardInterrupt(f"signal {signum} (SIGTERM)")

    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, handler)


def pytest_configure(config: pytest.Config) -> None:
    _stop_on_sigterm(config)


def examples(n: int) -> int:
    """Hypothesis examples for a wide differential test: all ``n`` when the slow tests run
    (CELLSPEC_SLOW=1, as `.ci/run` does with it), half in the lean default run."""
    return n if os.environ.get("CELLSPEC_SLOW") == "1" else max(1, n // 2)


def write_cell(tmp_path_factory: pytest.TempPathFactory, text: str,
               name: str = "c.cell") -> Path:
    """A cell text written to a fresh temporary directory (a test's own cell): its path."""
    f = tmp_path_factory.mktemp(Path(name).stem) / name
    f.write_text(text)
    return f


def run_cli(argv: list[str | os.PathLike[str]], stdin: str | bytes | None = None,
            cwd: str | os.PathLike[str] | None = None) -> tuple[int, str, str]:
    """``cellspec.cli.main(argv)`` in this process (no interpreter start-up): its exit code,
    stdout and stderr. ``stdin`` is the text a ``-`` input reads (default: empty); ``cwd``
    is entered for the call. os.environ, the cwd, sys.stdin/stdout/stderr and the root
    logger's handlers are restored afterwards, so calls do not leak into each other."""
    from cellspec.cli import main

    data = stdin.encode("utf-8") if isinstance(stdin, str) else (stdin or b"")
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_handlers = list(logging.getLogger().handlers)
    os.environ.pop("CELLSPEC_DEBUG", None)
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    sys.stdout, sys.stderr = out, err
    try:
        os.chdir(cwd or REPO)
        try:
            rc = main([os.fspath(a) for a in argv])
        except SystemExit as exc:  # argparse: --help, --version, usage errors
            code = exc.code
            rc = code if isinstance(code, int) else (0 if code is None else 1)
            if isinstance(code, str):
                print(code, file=err)
        if _TERMINATED:  # main() turned the run's SIGTERM into exit 130: stop the run
            raise KeyboardInterrupt("SIGTERM")
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        logging.getLogger().handlers[:] = saved_handlers
    return rc, out.getvalue(), err.getvalue()


def run_cellspec(*args: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None,
                 stdin: str | None = None, timeout: float = 120,
                 ) -> subprocess.CompletedProcess[str]:
    """``cellspec ARGS`` run in-process (:func:`run_cli`), as a CompletedProcess. ``timeout``
    is not enforced in-process (the verbs' own --time-limit is); it is kept for the call
    sites shared with :func:`run_cellspec_process`."""
    rc, out, err = run_cli(list(args), stdin=stdin, cwd=cwd)
    return subprocess.CompletedProcess(["cellspec", *map(str, args)], rc, out, err)


def run_cellspec_process(*args: str | os.PathLike[str],
                         cwd: str | os.PathLike[str] | None = None, stdin: str | None = None,
                         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``python -m cellspec ARGS`` as a real subprocess and capture text output: for the
    smoke tests of what only a process shows (exit codes through the interpreter, signals,
    the process-start clock of --time-limit, file descriptors) and for every --max-memory
    cap (a worker forked from a test process starts with that process's whole heap)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("CELLSPEC_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "cellspec", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd or REPO, env=env,
                          input=stdin, timeout=timeout, check=False)


@pytest.fixture(scope="session")
def cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """The CLI runner, in-process: ``cli("check", cell, layout, "--format", "json")``."""
    return run_cellspec


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def station_path() -> Path:
    return STATION


@pytest.fixture(scope="session")
def station_cell():
    import cellspec

    return cellspec.load_cell(str(STATION))


@pytest.fixture(scope="session")
def features_cell():
    import cellspec

    return cellspec.load_cell(str(FEATURES))


@contextlib.contextmanager
def loopback_server(on_accept: Callable[[socket.socket], None]) -> Iterator[int]:
    """A TCP server on 127.0.0.1 that hands each connection to ``on_accept`` and holds it
    open until the end (a peer that says nothing unless ``on_accept`` does); yields its
    port. The accept loop and the connections end with the block."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            held.append(c)
            on_accept(c)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        t.join(2)
        for c in held:
            c.close()
        srv.close()


# a one-robot cell with a supply area, ``{robot}`` the robot's model (or URDF) clause
ROBOT_CELL = """import physical

cell c {{
    units m
    workspace x [0.30, 0.70] y [-0.25, 0.25] z [0.00, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    robot arm {robot} base (0, 0, 0) gripper parallel opening 0.08 depth 0.02
    supply feeder x [0.30, 0.40] y [-0.45, -0.35] z [0.00, 0.10]
}}
"""

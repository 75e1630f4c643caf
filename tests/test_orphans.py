"""Nothing left behind (issue 31): a verb's bounded worker dies with its parent, even when
the parent is killed with SIGKILL while the worker waits on a model server that never
answers (a socket on 127.0.0.1 that accepts and stays silent)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, STATION, loopback_server

from cellspec.core.proc import preexec_die_with_parent, set_pdeathsig

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(d))
    return out


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(cond, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


@contextlib.contextmanager
def silent_server() -> Iterator[tuple[str, threading.Event]]:
    """An HTTP 'model server' on 127.0.0.1 that accepts connections and never answers:
    its base URL and an event set when a client has connected."""
    connected = threading.Event()
    with loopback_server(lambda c: connected.set()) as port:
        yield f"http://127.0.0.1:{port}/v1", connected


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["OPENAI_API_KEY"] = "test"
    return env


def test_design_worker_dies_when_the_verb_is_killed(tmp_path: Path) -> None:
    with silent_server() as (url, connected):
        p = subprocess.Popen(
            [sys.executable, "-m", "cellspec", "design", "build a 3-cube tower at x 0.4 y 0.2",
             "--cell", str(STATION), "--adapter", "openai", "--model", "m", "--base-url", url,
             "--timeout", "60", "--retries", "0", "-q",
             "--translate", "model"],  # hybrid (the default) would ask no model here
            cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=preexec_die_with_parent)
        workers: list[int] = []
        try:
            assert connected.wait(60), "the worker never called the model"
            workers = children(p.pid)
            assert workers, "no worker process"
            os.kill(p.pid, signal.SIGKILL)
            p.wait(10)
            assert wait_until(lambda: not any(alive(w) for w in workers), 5), \
                f"worker(s) {workers} still running after their parent was killed"
        finally:
            for w in [p.pid, *workers]:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(w, signal.SIGKILL)
            p.wait(10)
            if p.stderr:
                p.stderr.close()


def test_pipe_fallback_alone_ends_the_worker() -> None:
    """Without PR_SET_PDEATHSIG (a child that is not ours to arm), the lifeline pipe alone
    ends a bounded worker: run_bounded in a grandchild whose parent is killed."""
    code = ("import time, sys\n"
            "import cellspec.core.proc as proc\n"
            "proc.set_pdeathsig = lambda sig=0: False  # the portable fallback only\n"
            "from cellspec.commands import bounded\n"
            "bounded.run_bounded(lambda: time.sleep(120), time_limit=None, max_memory=None)\n")
    p = subprocess.Popen([sys.executable, "-c", code], env=_env(),
                         preexec_fn=preexec_die_with_parent)
    workers: list[int] = []
    try:
        assert wait_until(lambda: bool(children(p.pid)), 30)
        workers = children(p.pid)
        time.sleep(0.3)  # the worker armed its watch thread
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
        assert wait_until(lambda: not any(alive(w) for w in workers), 5), workers
    finally:
        for w in [p.pid, *workers]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(w, signal.SIGKILL)
        p.wait(10)


def test_set_pdeathsig_is_armed_on_linux() -> None:
    r = subprocess.run([sys.executable, "-c",
                        "from cellspec.core.proc import set_pdeathsig; print(set_pdeathsig())"],
                       env=_env(), capture_output=True, text=True, timeout=60, check=True)
    assert r.stdout.strip() == "True"
    assert callable(set_pdeathsig)


def _handler(req):  # noqa: ANN001 - a sandbox handler: sleep, allocate, die or echo
    kind, arg = req
    if kind == "sleep":
        time.sleep(arg)
    elif kind == "alloc":
        return len(bytearray(arg))
    elif kind == "die":
        os._exit(arg)
    return (os.getpid(), arg)


def test_sandbox_reuses_one_child_and_replaces_it_after_a_limit() -> None:
    from cellspec.core.proc import Sandbox

    sb = Sandbox(_handler, extra_memory=256 << 20)
    try:
        (k1, (p1, _)), (k2, (p2, _)) = sb.call(("echo", 1), 10), sb.call(("echo", 2), 10)
        assert k1 == k2 == "ok" and p1 == p2 != os.getpid()  # one warm child
        t0 = time.monotonic()
        assert sb.call(("sleep", 30), 0.5) == ("time", None)
        assert time.monotonic() - t0 < 3 and not alive(p1)
        assert sb.call(("alloc", 1 << 30), 10) == ("memory", None)
        assert sb.call(("die", 3), 10) == ("crash", 3)
        kind, (p3, arg) = sb.call(("echo", 3), 10)
        assert kind == "ok" and arg == 3 and p3 != p1
    finally:
        sb.close()
    assert not alive(p3)


def test_sandbox_killed_between_requests_is_replaced() -> None:
    from cellspec.core.proc import Sandbox

    sb = Sandbox(_handler, extra_memory=None)
    try:
        _, (p1, _) = sb.call(("echo", 1), 10)
        os.kill(p1, signal.SIGKILL)
        # between requests: its death is reportable (a zombie's other threads may still be
        # ending for a moment after /proc shows Z; peek without reaping)
        assert wait_until(lambda: os.waitid(os.P_PID, p1, os.WEXITED | os.WNOHANG
                                            | os.WNOWAIT) is not None, 5)
        kind, (p2, arg) = sb.call(("echo", 2), 10)
        assert kind == "ok" and arg == 2 and p2 != p1
    finally:
        sb.close()

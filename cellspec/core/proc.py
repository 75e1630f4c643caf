"""Child processes that die with their parent: a worker is never left running (parent 1)
after the process that started it was killed, even by ``kill -9``.

Two mechanisms, both armed in the child: Linux's ``prctl(PR_SET_PDEATHSIG, SIGKILL)``
(the kernel kills the child when its parent exits), and, portable, a pipe whose write end
only the parent holds: a daemon thread in the child blocks reading it and ends the child
when it reads end of file (the parent is gone, however it died).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import pickle
import resource
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any


class Outcome(StrEnum):
    """How a call in a bounded child ended (the first item of its result pair): its value
    (``ok``), bad input or a bug it reported (``input``, ``internal``: the verbs' workers),
    or the limit that stopped it (``time``, ``memory``) or a crash (its exit status)."""

    OK = "ok"
    INPUT = "input"
    INTERNAL = "internal"
    TIME = "time"
    MEMORY = "memory"
    CRASH = "crash"


PR_SET_PDEATHSIG = 1
ORPHAN_EXIT = 87  # a worker's exit code when it ended because its parent was gone
# how a child under an address-space cap dies when the cap refuses memory: a MemoryError
# (86), an error raised while it could not allocate (70: e.g. a SystemError in an import,
# or the result not pickled), OpenBLAS's exit(1) when its buffers are refused, or a C++
# library's abort or fault on a failed allocation
CAPPED_DEATHS = (86, 70, 1, -signal.SIGABRT, -signal.SIGSEGV, -signal.SIGBUS)


def set_pdeathsig(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent exits (Linux only;
    False where unavailable)."""
    libc = _libc()
    if libc is None:
        return False
    try:
        return int(libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


_LIBC: list[Any] = []


def _libc() -> Any:
    """The C library (Linux; None elsewhere), loaded once: finding it runs ldconfig."""
    if not sys.platform.startswith("linux"):
        return None
    if not _LIBC:
        try:
            _LIBC.append(ctypes.CDLL("libc.so.6", use_errno=True))
        except OSError:
            try:
                _LIBC.append(ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True))
            except OSError:
                _LIBC.append(None)
    return _LIBC[0]


_libc()  # now, in the parent: a forked child then only calls prctl


def _watch(fd: int) -> None:
    """Block on the parent's pipe; end of file (or an error) means the parent is gone."""
    try:
        while os.read(fd, 1):
            pass
    except OSError:
        pass
    os._exit(ORPHAN_EXIT)


def die_with_parent(parent_pid: int, watch_fd: int | None = None) -> None:
    """Arm both mechanisms in a child whose parent is ``parent_pid``; ``watch_fd`` is the
    read end of a pipe the parent keeps the write end of (the child must have closed its
    copy of the write end). Exits at once when the parent is already gone."""
    set_pdeathsig(signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(ORPHAN_EXIT)
    if watch_fd is not None:
        threading.Thread(target=_watch, args=(watch_fd,), name="cellspec-parent-watch",
                         daemon=True).start()


def preexec_die_with_parent() -> None:
    """A ``subprocess.Popen(preexec_fn=...)`` that makes the child die with its parent
    (``SIGTERM``, so the child may shut down its own children cleanly)."""
    set_pdeathsig(signal.SIGTERM)



def vm_size() -> int:
    """This process's address-space size in bytes (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def call_in_fork(fn: Callable[[], Any], *, seconds: float | None,
                 extra_memory: int | None, group: bool = False) -> tuple[Outcome, Any]:
    """``fn()`` in a forked child (lean: a few milliseconds, no multiprocessing) that dies
    with this process, is killed after ``seconds`` and may grow its address space by
    ``extra_memory`` bytes beyond what it inherits. Returns ``("ok", value)``, ``("time",
    None)``, ``("memory", None)`` (a MemoryError, or a crash under the cap) or ``("crash",
    exit status)``. ``fn`` must catch its own errors; its value must pickle. ``group``: the
    child leads a process group, killed whole when it ends (``fn`` starts processes)."""
    r, w = os.pipe()
    life_r, life_w = os.pipe()
    parent = os.getpid()
    base = vm_size()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(r)
            os.close(life_w)
            if group:
                os.setpgid(0, 0)
            die_with_parent(parent, life_r)
            if extra_memory is not None and base:
                cap = base + extra_memory
                with contextlib.suppress(ValueError, OSError):
                    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
            try:
                out: tuple[Outcome, Any] = (Outcome.OK, fn())
            except MemoryError:
                out = (Outcome.MEMORY, None)
            blob = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
            view = memoryview(len(blob).to_bytes(8, "little") + blob)
            while view:
                view = view[os.write(w, view):]
        except MemoryError:
            code = 86
        except BaseException:  # noqa: BLE001 - the parent reports a crash
            code = 70
        os._exit(code)
    os.close(w)
    os.close(life_r)
    try:
        data, status, timed_out = _collect(pid, r, seconds)
    finally:
        os.close(life_w)
        if group:  # whatever the child started goes with it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
    if timed_out:
        return (Outcome.TIME, None)
    if data is not None:
        try:
            got = pickle.loads(data)
        except Exception:  # noqa: BLE001 - a result that does not unpickle
            got = None
        if isinstance(got, tuple) and len(got) == 2:
            return got
    code = os.waitstatus_to_exitcode(status)
    if extra_memory is not None and code in CAPPED_DEATHS:
        return (Outcome.MEMORY, None)
    return (Outcome.CRASH, code)


def _collect(pid: int, r: int, seconds: float | None) -> tuple[bytes | None, int, bool]:
    """The child's length-prefixed result from pipe ``r`` (None: it died without one), its
    wait status, and whether the deadline passed first (the child is then killed). Polls
    the child's exit too: a sibling forked meanwhile may hold the pipe's write end open."""
    end = None if seconds is None else time.monotonic() + seconds
    buf = bytearray()
    status: int | None = None
    timed_out = False
    try:
        while True:
            want = 8 + int.from_bytes(buf[:8], "little") if len(buf) >= 8 else None
            if want is not None and len(buf) >= want:
                break
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([r], [], [], 0.05 if left is None else
                                        min(0.05, left))
            if ready:
                chunk = os.read(r, 1 << 20)
                if chunk:
                    buf += chunk
                    continue
                break  # end of file: the child is gone
            if status is None:
                done, st = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = st
            if status is not None and not select.select([r], [], [], 0)[0]:
                break  # the child exited and left nothing more to read
    finally:
        os.close(r)
        if status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
    want = 8 + int.from_bytes(buf[:8], "little") if len(buf) >= 8 else None
    data = bytes(buf[8:want]) if want is not None and len(buf) >= want else None
    return data, status, timed_out and data is None


def _send_msg(fd: int, obj: Any) -> None:
    blob = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(len(blob).to_bytes(8, "little") + blob)
    while view:
        view = view[os.write(fd, view):]


def _recv_exactly(fd: int, n: int, end: float | None) -> bytes | None:
    """``n`` bytes from ``fd`` by the deadline ``end`` (None: no deadline); None at end of
    file; raises TimeoutError when the deadline passes first."""
    buf = bytearray()
    while len(buf) < n:
        if end is not None:
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        b = os.read(fd, min(n - len(buf), 1 << 20))
        if not b:
            return None
        buf += b
    return bytes(buf)


def _recv_msg(fd: int, end: float | None = None) -> tuple[bool, Any]:
    """(True, the object) or (False, None) at end of file; TimeoutError past ``end``."""
    head = _recv_exactly(fd, 8, end)
    if head is None:
        return False, None
    blob = _recv_exactly(fd, int.from_bytes(head, "little"), end)
    return (False, None) if blob is None else (True, pickle.loads(blob))


_HELD: set[int] = set()  # this process's ends of its sandboxes' pipes (a new child closes them)


class Sandbox:
    """A forked child that runs ``handler(request)`` for one request after another, each
    stopped at its own deadline: the child keeps what it inherited warm (imports, caches),
    so a request costs a pipe round trip, not a fork. A request that overruns its deadline
    or exhausts the child's memory (``extra_memory`` bytes beyond what it inherited) ends
    the child; the next request forks a fresh one. The child dies with its parent."""

    def __init__(self, handler: Callable[[Any], Any], extra_memory: int | None) -> None:
        self.handler, self.extra_memory = handler, extra_memory
        self.pid: int | None = None
        self.req_w = self.res_r = self.life_w = -1

    def _start(self) -> None:
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        life_r, life_w = os.pipe()
        parent = os.getpid()
        base = vm_size()
        pid = os.fork()
        if pid == 0:  # the child: serve until the request pipe closes; never returns
            code = 0
            try:
                for fd in (req_w, res_r, life_w, *_HELD):  # other sandboxes' too
                    with contextlib.suppress(OSError):
                        os.close(fd)
                die_with_parent(parent, life_r)
                if self.extra_memory is not None and base:
                    cap = base + self.extra_memory
                    with contextlib.suppress(ValueError, OSError):
                        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
                while True:
                    ok, req = _recv_msg(req_r)
                    if not ok:
                        break
                    try:
                        out: tuple[Outcome, Any] = (Outcome.OK, self.handler(req))
                    except MemoryError:
                        out = (Outcome.MEMORY, None)
                    _send_msg(res_w, out)
                    if out[0] == Outcome.MEMORY:
                        break  # a fresh child for the next request
            except MemoryError:
                code = 86
            except BaseException:  # noqa: BLE001 - the parent reports a crash
                code = 70
            os._exit(code)
        for fd in (req_r, res_w, life_r):
            os.close(fd)
        self.pid, self.req_w, self.res_r, self.life_w = pid, req_w, res_r, life_w
        _HELD.update((req_w, res_r, life_w))

    def _drop_fds(self) -> None:
        for fd in (self.req_w, self.res_r, self.life_w):
            _HELD.discard(fd)
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        """Stop the child (if any)."""
        if self.pid is None:
            return
        self._drop_fds()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        self.pid = None

    def call(self, request: Any, seconds: float | None) -> tuple[Outcome, Any]:
        """``handler(request)`` in the child: ``("ok", value)``, ``("time", None)``,
        ``("memory", None)`` or ``("crash", exit status)``, as :func:`call_in_fork`."""
        if self.pid is not None and os.waitpid(self.pid, os.WNOHANG)[0]:
            self._drop_fds()  # it died between requests (killed from outside): a fresh one
            self.pid = None
        if self.pid is None:
            self._start()
        end = None if seconds is None else time.monotonic() + seconds
        try:
            _send_msg(self.req_w, request)
            ok, out = _recv_msg(self.res_r, end)
        except TimeoutError:
            self.close()
            return (Outcome.TIME, None)
        except (BrokenPipeError, pickle.UnpicklingError, EOFError):
            ok, out = False, None
        if ok and isinstance(out, tuple) and len(out) == 2:
            if out[0] == Outcome.MEMORY:
                self.close()
            return out
        pid = self.pid
        assert pid is not None
        self._drop_fds()
        _, status = os.waitpid(pid, 0)
        self.pid = None
        code = os.waitstatus_to_exitcode(status)
        if self.extra_memory is not None and code in CAPPED_DEATHS:
            return (Outcome.MEMORY, None)
        return (Outcome.CRASH, code)


def unmappable(exc: BaseException) -> bool:
    """Whether an import or OS error (or one it was raised from: numpy wraps the loader's)
    says a shared library could not be mapped or memory allocated, or a C extension failed
    to import (pybullet's numpy under a small cap): the budget refused."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        text = str(seen).lower()
        if "map" in text or "cannot allocate" in text or "failed to import" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False

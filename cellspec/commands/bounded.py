"""One deadline and one memory budget per verb: the verb's work runs in a forked worker
process that is stopped at the deadline, with its address space capped at the budget.

Grounding in clingo, building a CP-SAT model or a Z3 term cannot be interrupted inside
the process, so an in-process timer cannot bound them; a worker process can always be
stopped. The parent waits for the worker's result until ``time_limit`` seconds after the
verb started (parsing, grounding, solving, re-verification: everything but printing),
then kills it and reports ``unknown`` (reason: time limit). The worker runs under
``RLIMIT_AS = max_memory``; an allocation beyond it fails inside the worker, which then
reports ``unknown`` (reason: memory limit) instead of the machine's OOM killer stopping
anything. Inputs that are small run the same way (a fork costs milliseconds).
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import pickle
import resource
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, overload

from cellspec.core.errors import CellspecError
from cellspec.core.proc import Outcome, die_with_parent, unmappable, vm_size


def _process_age() -> float:
    """Seconds since this process started (Linux /proc; 0 elsewhere), so the verb's clock
    includes the interpreter's start-up and imports."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as fh:
            up = float(fh.read().split()[0])
        return max(0.0, up - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


STARTED = time.monotonic() - _process_age()  # the verb's clock: from the process start


def start_clock(from_process_start: bool) -> None:
    """Start the verb's clock: from the process start for the command line (``python -m
    cellspec``, the console script: the interpreter's start-up counts), from now for a
    library caller of ``cellspec.cli.main([...])`` in a process that may be hours old."""
    global STARTED
    STARTED = time.monotonic() - _process_age() if from_process_start else time.monotonic()
GRACE_S = 0.05  # the parent's margin to receive a result that arrives at the deadline
MEMORY_EXIT = 86  # the worker's exit code when it ran out of memory before it could report
START_RESERVE = 64 * 1024**2  # address space a worker needs beyond what it inherits to start


class WorkerError(RuntimeError):
    """An unexpected exception in the worker (a bug): the CLI reports it as internal."""


@dataclass(frozen=True)
class LimitHit:
    """The verb did not finish within its budget: ``kind`` is ``time limit`` or ``memory
    limit``; ``reason`` is the sentence for the ``unknown`` verdict."""

    kind: str
    reason: str
    seconds: float


def print_stopped(hit: LimitHit, fmt: str, obj: Any, pretty: str) -> int:
    """Print the ``unknown`` of a stopped verb from plain data (importing the result models
    would cost the parent half a second after the deadline); returns exit code 2."""
    if fmt == "json":
        print(json.dumps(obj, indent=2))
    else:
        print(pretty)
    return 2


def print_unknown(hit: LimitHit, fmt: str, fields: dict[str, Any], *, key: str = "status",
                  handed: str | None = None) -> int:
    """Print the ``unknown`` of a stopped verb whose result has a ``key`` (``status``,
    ``verdict``, ``outcome``) and a ``reason``: ``fields`` are the empty result's other
    keys; ``handed`` names what an anytime verb did not hand over in time (``repair``,
    ``layout``). One form for every worker verb (repair, generate, sim, design); exit 2."""
    why = hit.reason if handed is None else \
        f"{hit.reason}; no verified {handed} was handed over in time"
    return print_stopped(hit, fmt, {key: "unknown", **fields, "reason": why,
                                    "reason_code": hit.kind, "seconds": round(hit.seconds, 4)},
                         f"unknown: {why} ({hit.seconds:.3f} s)")


def in_all(seconds: float) -> str:
    """A verb's time for its pretty summary line: the whole verb's so far (from the process
    start: loading, the work, what was printed before this line), never less than the
    solver's ``seconds`` (the JSON keeps the solver's own, as ``seconds``)."""
    return f"{max(seconds, time.monotonic() - STARTED):.3f} s"


def anytime_grace(time_limit: float | None) -> float:
    """Seconds an anytime verb (``repair``, ``generate``) may run past its ``--time-limit``
    before its worker is stopped: the verb itself stops at the limit with its best verified
    answer, and needs a moment to re-verify and hand it over; the grace keeps the whole verb
    within max(2 x limit, limit + 1 s), the limits contract (issue 16)."""
    if time_limit is None:
        return 0.0
    return min(1.0, max(0.25, 0.5 * time_limit))


@overload
def remaining(time_limit: float, started: float | None = None) -> float: ...
@overload
def remaining(time_limit: None, started: float | None = None) -> None: ...
@overload
def remaining(time_limit: float | None, started: float | None = None) -> float | None: ...


def remaining(time_limit: float | None, started: float | None = None) -> float | None:
    """Seconds left of the verb's budget (at least 1 ms), or None without a limit
    (``started``: the clock's start, default the verb's: :func:`start_clock`)."""
    if time_limit is None:
        return None
    return max(0.001, time_limit - (time.monotonic() - (STARTED if started is None
                                                          else started)))


def _mib(n: int) -> str:
    return f"{n / 1024**2:.0f} MiB"



def _child(conn: Connection, fn: Callable[[], Any], max_memory: int | None,
           stdin_fd: int | None, stdin_data: bytes | None = None,
           life: tuple[int, int, int] | None = None) -> None:
    if life is not None:  # (parent pid, read end, write end): die when the parent does
        os.close(life[2])
        die_with_parent(life[0], life[1])
    if stdin_data is not None:  # an in-memory stdin (a caller's stream, not fd 0)
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin_data), encoding="utf-8")
    elif stdin_fd is not None:  # multiprocessing closed stdin: `-` inputs read the saved copy
        sys.stdin = io.TextIOWrapper(os.fdopen(stdin_fd, "rb"), encoding="utf-8")
    if max_memory is not None:
        # OpenBLAS reserves a buffer per thread when numpy loads (hundreds of MiB of
        # address space on a many-core machine) and exits the process when it cannot:
        # one thread is enough for the worker's small matrices (issue 31)
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
            os.environ.setdefault(var, "1")
        try:
            resource.setrlimit(resource.RLIMIT_AS, (max_memory, max_memory))
        except (ValueError, OSError):
            pass
    try:
        out: tuple[Outcome, Any] = (Outcome.OK, fn())
    except CellspecError as exc:
        out = (Outcome.INPUT, exc.diagnostics)
    except MemoryError:
        out = (Outcome.MEMORY, None)
    except (ImportError, OSError) as exc:  # a library that cannot be mapped under the cap
        out = (Outcome.MEMORY, None) if unmappable(exc) else \
            (Outcome.INTERNAL, (f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    except RuntimeError as exc:  # clingo and OR-Tools report std::bad_alloc this way; a
        # thread whose stack the cap refuses: "can't start new thread" / EAGAIN
        text = str(exc).lower()
        out = (Outcome.MEMORY, None) if max_memory is not None and any(
            w in text for w in ("alloc", "can't start new thread",
                                "resource temporarily unavailable")) else \
            (Outcome.INTERNAL, (f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    except SystemError as exc:  # a C extension whose allocation failed without saying so
        out = (Outcome.MEMORY, None) if max_memory is not None else \
            (Outcome.INTERNAL, (f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    except BaseException as exc:  # a bug: the parent says so (exit 3)
        out = (Outcome.INTERNAL, (f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    try:
        conn.send_bytes(pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))
    except MemoryError:
        os._exit(MEMORY_EXIT)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        conn.send_bytes(pickle.dumps((Outcome.INTERNAL, (f"result not picklable: {exc}", ""))))
    conn.close()


def _memory_stdin() -> bytes | None:
    """The contents of ``sys.stdin`` when it is an in-memory stream (no file descriptor,
    e.g. a library caller's), which the forked worker could not otherwise read."""
    s = sys.stdin
    if s is None:
        return None
    try:
        s.fileno()
        return None
    except (AttributeError, OSError, ValueError):
        pass
    try:
        buf = getattr(s, "buffer", None)
        return buf.read() if buf is not None else s.read().encode("utf-8")
    except (OSError, ValueError):
        return None


def run_bounded(fn: Callable[[], Any], *, time_limit: float | None,
                max_memory: int | None, started: float | None = None,
                meanwhile: Callable[[], Any] | None = None) -> Any:
    """``fn()`` computed in a worker within the verb's budget: its result, or a
    :class:`LimitHit`. A CellspecError in the worker is re-raised here (exit 2); an
    unexpected exception becomes a :class:`WorkerError` naming it (exit 3, a bug).
    ``meanwhile`` runs in the parent while the worker works (e.g. importing what printing
    the result needs, so nothing slow is left after the deadline)."""
    started = STARTED if started is None else started
    if max_memory is not None:
        base = vm_size()
        if max_memory < base + START_RESERVE:  # the worker could not even start in it
            return LimitHit("memory limit", f"memory limit: the run needed more than "
                            f"{_mib(max_memory)} (--max-memory): this process alone maps "
                            f"{_mib(base)} of address space before the work starts; give "
                            "a larger budget (loading the solvers takes a few hundred MiB)",
                            time.monotonic() - started)
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    try:
        stdin_fd: int | None = os.dup(0)
    except OSError:
        stdin_fd = None
    stdin_data = _memory_stdin()
    # the worker dies with this process, even after kill -9 (issue 31): it watches the read
    # end of a pipe whose write end only this process holds, and on Linux the kernel
    # sends it SIGKILL when this process exits
    life_r, life_w = os.pipe()
    proc = ctx.Process(target=_child, args=(send, fn, max_memory, stdin_fd, stdin_data,
                                            (os.getpid(), life_r, life_w)), daemon=True)
    try:
        proc.start()
    except BaseException:
        os.close(life_w)
        raise
    finally:
        os.close(life_r)
        if stdin_fd is not None:
            os.close(stdin_fd)
    send.close()
    ready, data = False, None
    try:
        if meanwhile is not None:
            meanwhile()
        # wait until the deadline plus the grace for a result that arrives at it; a budget
        # spent before the worker started (a limit shorter than the start-up) waits for
        # nothing, so the verdict does not depend on how fast the worker happens to be
        left = None if time_limit is None else time_limit - (time.monotonic() - started)
        ready = recv.poll(None if left is None else max(0.0, left + GRACE_S))
        if ready:
            try:
                data = recv.recv_bytes()
            except EOFError:
                data = None
    finally:
        # the result is in (or the deadline passed): the worker has nothing left worth
        # waiting for (its interpreter shutdown can take seconds on a large heap)
        if ready and data is None:  # end of file: the worker died without a result
            proc.join(5)
        exit_before = proc.exitcode
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        if proc.is_alive() and proc.pid is not None:  # pragma: no cover - ignores SIGKILL
            os.kill(proc.pid, signal.SIGKILL)
        recv.close()
        os.close(life_w)
    took = time.monotonic() - started
    if data is None:
        if exit_before is not None and exit_before != -signal.SIGKILL:
            # the worker died without a result: an allocation the budget refused (C++
            # libraries abort on std::bad_alloc) or a crash; under a budget, say memory
            # exit code 1 without a result: a native library called exit(1) (OpenBLAS
            # does when it cannot reserve its buffers; Python code cannot get here)
            if max_memory is not None and exit_before in (MEMORY_EXIT, 1, -signal.SIGABRT,
                                                           -signal.SIGSEGV, -signal.SIGBUS):
                how = "" if exit_before == MEMORY_EXIT else \
                    ("; a native library (OpenBLAS) could not reserve its memory: give a "
                     "larger budget" if exit_before == 1 else
                     f"; the solver stopped with {signal.Signals(-exit_before).name}")
                return LimitHit("memory limit", f"memory limit: the run needed more than "
                                f"{_mib(max_memory)} (--max-memory){how}", took)
            raise WorkerError(f"the worker process died (exit code {exit_before})")
        return LimitHit("time limit", f"time limit: not finished within {time_limit:g} s "
                        "(--time-limit bounds the whole verb: loading, grounding, solving)",
                        took)
    kind, value = pickle.loads(data)
    if kind == Outcome.OK:
        return value
    if kind == Outcome.INPUT:
        raise CellspecError(value)
    if kind == Outcome.MEMORY:
        return LimitHit("memory limit", f"memory limit: the run needed more than "
                        f"{_mib(max_memory or 0)} (--max-memory)" if max_memory else
                        "memory limit: out of memory", took)
    what, tb = value
    if os.environ.get("CELLSPEC_DEBUG"):
        print(tb, file=sys.stderr)
    raise WorkerError(what)

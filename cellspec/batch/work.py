"""What a worker does with a chunk of layouts: parse each, run the verb, return one record
per layout. The cell arrives once per worker (a pickled, already-resolved :class:`Cell`,
installed by :class:`CellPlugin` or by the first chunk in process) and is cached by its hash,
so no layout pays for parsing or compiling the rules again.

Test hook: a Dask worker whose environment sets ``CELLSPEC_BATCH_CRASH_ID=ID`` kills its own
process (SIGKILL) when it reaches the layout ``ID``; the tests use it to prove that a layout
crashing a worker becomes an error for that layout, not a lost batch. Never set in production.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import resource
import signal
import threading
import time
from collections import OrderedDict
from typing import Any

import numpy as np

from cellspec import __version__
from cellspec.batch.inputs import Item
from cellspec.core.errors import CellspecError, Diagnostic, line_col
from cellspec.core.proc import Outcome, Sandbox, call_in_fork, unmappable
from cellspec.core.status import FOUND, Status
from cellspec.dsl.model import Cell
from cellspec.layout import Layout, layout_from_obj
from cellspec.robots import settle as _s
from cellspec.solver.cpsat.repair import repair
from cellspec.solver.cpsat.sequence import plan
from cellspec.solver.verify import check

VERBS = ("check", "repair", "plan", "settle")
CRASH_ENV = "CELLSPEC_BATCH_CRASH_ID"
_CELLS: OrderedDict[str, Cell] = OrderedDict()
_MAX_CELLS = 8
_NAN_RE = re.compile(r"(?<![\w\"])-?(NaN|Infinity)(?![\w\"])")


def pack_cell(cell: Cell) -> tuple[str, bytes]:
    """The cell as bytes for the workers and its cache key (sha256 of those bytes)."""
    blob = pickle.dumps(cell, protocol=pickle.HIGHEST_PROTOCOL)
    return hashlib.sha256(blob).hexdigest(), blob


def install_cell(key: str, blob: bytes) -> Cell:
    """Unpickle a cell into this process's cache (at most 8 cells, least recent dropped)."""
    cell = _CELLS.get(key)
    if cell is None:
        cell = pickle.loads(blob)
        _CELLS[key] = cell
        while len(_CELLS) > _MAX_CELLS:
            _CELLS.popitem(last=False)
    _CELLS.move_to_end(key)
    return cell


def cached_cells() -> list[str]:
    """The keys of the cells cached in this process (for tests and ``--stats``)."""
    return list(_CELLS)


try:  # the plugin class only exists where distributed is installed
    from distributed.diagnostics.plugin import WorkerPlugin as _WorkerPlugin
except ImportError:  # pragma: no cover - batch then runs --serial only
    _WorkerPlugin = object  # type: ignore[assignment,misc]


class CellPlugin(_WorkerPlugin):
    """Installs one cell on every worker of the cluster, including workers that join later
    (or restart after a crash), so chunks carry only the cell's key."""

    def __init__(self, key: str, blob: bytes, version: str):
        self.key, self.blob, self.version = key, blob, version

    def setup(self, worker: Any) -> None:
        """Called by Dask on each worker: unpickle the cell once, for every chunk to come."""
        if __version__ != self.version:
            return  # run_chunk reports the mismatch for every layout
        warm(install_cell(self.key, self.blob))


def warm(cell: Cell) -> None:
    """Import the solvers and compile the cell's rules (with and without an order) now,
    once per worker, instead of in the first layout's time."""
    empty = np.zeros((0, 3))
    lay = Layout(ids=(), types=(), pos=empty, size=empty.copy(), grippers=(), order=None)
    check(cell, lay)
    check(cell, lay.with_order(()))


def run_chunk(key: str, verb: str, options: dict[str, Any], version: str | None,
              items: list[Item]) -> list[dict[str, Any]]:
    """One record per item, in the chunk's order; bad input and failures of one layout
    become that layout's record, so a chunk never fails because of its data."""
    cell = _CELLS.get(key)
    if cell is None:
        why = (f"this worker runs cellspec {__version__}, the client {version}"
               if version and version != __version__ else
               "the cell was not installed on this worker")
        return [error_record(it, why) for it in items]
    crash = os.environ.get(CRASH_ENV)
    if crash is not None and not _in_dask_worker():
        crash = None
    return [run_one(cell, verb, options, it, crash, key) for it in items]


def _in_dask_worker() -> bool:
    try:
        # lazy: the dask extra; only batch/test on a cluster need it
        from distributed import get_worker

        get_worker()
        return True
    except (ImportError, ValueError):
        return False


def run_one(cell: Cell, verb: str, options: dict[str, Any], it: Item,
            crash: str | None = None, key: str | None = None) -> dict[str, Any]:
    """Parse one layout and run the verb on it: its output record (``seconds`` last).
    ``crash``: the test hook's layout id (this process kills itself on it); ``key``: the
    cell's cache key (a bounded layout then runs in this thread's warm sandbox)."""
    t0 = time.perf_counter()
    ident = it.id
    try:
        if it.error is not None:
            raise CellspecError(Diagnostic(it.where, it.line, 1 if it.line else 0, it.error))
        ident, layout = parse_item(it)
        if crash is not None and ident == crash:
            os.kill(os.getpid(), signal.SIGKILL)
        bound = options.get("bound")
        rec = {"id": ident, **(_VERB_FUNCS[verb](cell, layout, options) if not bound else
                               _bounded(verb, cell, layout, options, bound, key))}
    except CellspecError as exc:
        rec = {"id": ident, "verdict": "bad input", "violations": [],
               "errors": [str(d) for d in exc.diagnostics]}
    except Exception as exc:  # a bug in a solver for this layout: its error, not the batch's
        rec = {"id": ident, "verdict": "error", "violations": [],
               "error": f"internal error: {type(exc).__name__}: {exc}"}
    rec["seconds"] = round(time.perf_counter() - t0, 4)
    return rec


def layout_bound(verb: str, time_limit: float, timeout: float | None,
                 max_memory: int | None, default_memory: int) -> dict[str, Any] | None:
    """The per-layout budget of a batch (issue 31), or None (check without --timeout or
    --max-memory: in process, no fork per layout). ``seconds``: the whole layout's
    deadline (the solver's own limit plus a grace to hand its answer over: at most 1 s),
    ``memory``: what the layout may add to its worker's address space."""
    if verb == "check" and timeout is None and max_memory is None:
        return None
    limit = time_limit if verb != "check" else timeout
    seconds = None if limit is None else limit + min(1.0, max(0.25, 0.5 * limit))
    return {"seconds": seconds, "memory": max_memory or default_memory}


_SANDBOXES = threading.local()  # per thread: the sandbox child that runs its layouts


def _sandbox(key: str, memory: int | None) -> Sandbox:
    """This thread's sandbox for the cell ``key`` (a fresh one for another cell, budget or
    process)."""
    sb = getattr(_SANDBOXES, "sb", None)
    want = (key, memory, os.getpid())
    if sb is None or sb.tag != want:
        if sb is not None and sb.tag[2] == os.getpid():
            sb.close()
        sb = Sandbox(_serve_layout, memory)
        sb.tag = want  # type: ignore[attr-defined]
        _SANDBOXES.sb = sb
    return sb


def close_sandboxes() -> None:
    """Stop this thread's sandbox child (the end of an in-process batch)."""
    sb = getattr(_SANDBOXES, "sb", None)
    if sb is not None and sb.tag[2] == os.getpid():
        sb.close()
    _SANDBOXES.sb = None


def _serve_layout(req: tuple[str, str, dict[str, Any], Layout]) -> tuple[Outcome, Any]:
    """In the sandbox child: one layout's verb (the cell from this process's cache)."""
    key, verb, options, layout = req
    return _work(verb, _CELLS[key], layout, options)


def _bounded(verb: str, cell: Cell, layout: Layout, options: dict[str, Any],
             bound: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    """The verb on one layout in a sandbox child (forked once, warm; see core/proc.py)
    stopped at ``bound``: its record, or an ``unknown`` naming the limit hit."""
    if key is not None and _CELLS.get(key) is cell:
        kind, value = _sandbox(key, bound["memory"]).call((key, verb, options, layout),
                                                          bound["seconds"])
    else:
        kind, value = call_in_fork(lambda: _work(verb, cell, layout, options),
                                   seconds=bound["seconds"], extra_memory=bound["memory"])
    return _record(verb, bound, kind, value)


def _work(verb: str, cell: Cell, layout: Layout, options: dict[str, Any]) -> tuple[Outcome, Any]:
    """The verb on one layout, its errors as values (in the child)."""
    try:
        return (Outcome.OK, _VERB_FUNCS[verb](cell, layout, options))
    except CellspecError as exc:
        return (Outcome.INPUT, [str(d) for d in exc.diagnostics])
    except RuntimeError as exc:  # clingo and OR-Tools report std::bad_alloc this way
        if "alloc" in str(exc).lower():
            raise MemoryError from None
        return (Outcome.INTERNAL, f"{type(exc).__name__}: {exc}")
    except (ImportError, OSError) as exc:  # a library that cannot be mapped under the cap
        if unmappable(exc):
            raise MemoryError from None
        return (Outcome.INTERNAL, f"{type(exc).__name__}: {exc}")
    except SystemError as exc:  # CPython's allocation failure inside an import or a call
        if _capped() and "returned NULL" in str(exc):
            raise MemoryError from None
        return (Outcome.INTERNAL, f"{type(exc).__name__}: {exc}")
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - a bug for this layout: its record
        return (Outcome.INTERNAL, f"{type(exc).__name__}: {exc}")




def _capped() -> bool:
    """Whether this process runs under an address-space cap (a --max-memory child)."""
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return soft != resource.RLIM_INFINITY


def _record(verb: str, bound: dict[str, Any], kind: str, value: Any) -> dict[str, Any]:
    """The record of a bounded layout from its child's outcome."""
    if kind == Outcome.OK:
        what, got = value
        if what == Outcome.OK:
            return dict(got)
        if what == Outcome.INPUT:
            return {"verdict": "bad input", "violations": [], "errors": list(got)}
        return {"verdict": "error", "violations": [], "error": f"internal error: {got}"}
    status = {"status": "unknown"} if verb in ("repair", "plan") else {}
    if kind == Outcome.TIME:
        return {"verdict": "unknown", "violations": [], **status, "reason_code": "time limit",
                "reason": f"time limit: the layout was not finished within "
                f"{bound['seconds']:g} s and was stopped (--time-limit"
                f"{'' if verb != 'check' else ' / --timeout'} per layout, plus the "
                "solver's grace to hand its answer over)"}
    if kind == Outcome.MEMORY:
        return {"verdict": "unknown", "violations": [], **status,
                "reason_code": "memory limit",
                "reason": f"memory limit: the layout needed more than "
                f"{bound['memory'] / 1024**2:.0f} MiB (--max-memory per layout)"}
    return {"verdict": "error", "violations": [],
            "error": f"internal error: the layout's process died (exit code {value})"}



def error_record(it: Item, why: str) -> dict[str, Any]:
    """The record of a layout that could not be run at all (a crashed worker, a mismatch),
    under the id the layout gives itself when it does."""
    ident = it.id
    if it.line and it.text is not None:
        try:
            obj = json.loads(it.text)
            if isinstance(obj, dict) and isinstance(obj.get("id"), str) and obj["id"]:
                ident = obj["id"]
        except (ValueError, RecursionError):
            pass
    return {"id": ident, "verdict": "error", "violations": [], "error": why, "seconds": 0.0}


def parse_item(it: Item) -> tuple[str, Layout]:
    """(id, layout) from an item's JSON text, diagnostics naming file:line:col."""
    assert it.text is not None
    where = it.where if not it.line else f"{it.where}:{it.line}"

    def bad(msg: str, line: int = 0, col: int = 0) -> CellspecError:
        if it.line:  # a JSON-lines item: the line is the file's, the column the line's
            return CellspecError(Diagnostic(it.where, it.line, col, msg))
        return CellspecError(Diagnostic(it.where, line, col, msg))

    if not it.text.strip():
        raise bad("empty layout file: expected a JSON object with \"parts\"", 1, 1)
    try:
        obj = json.loads(it.text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise bad(f"invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except _Constant as exc:
        m = _NAN_RE.search(it.text)
        line, col = line_col(it.text, m.start()) if m else (0, 0)
        raise bad(f"invalid JSON: {exc} (NaN and Infinity are not allowed)", line,
                  col) from None
    except (ValueError, RecursionError) as exc:
        raise bad(f"invalid JSON: {exc}") from None
    ident = it.id
    if it.line and isinstance(obj, dict) and "id" in obj:
        name = obj.pop("id")
        if not isinstance(name, str) or not name:
            raise bad("\"id\" must be a non-empty string (the layout's name in the batch)")
        ident = name
    return ident, layout_from_obj(obj, where)


class _Constant(ValueError):
    pass


def _no_constant(name: str) -> float:
    raise _Constant(f"{name} is not a number")


def _check(cell: Cell, layout: Layout, o: dict[str, Any]) -> dict[str, Any]:
    v = check(cell, layout, timeout=o.get("timeout"))
    rec: dict[str, Any] = {"verdict": v.verdict,
                           "violations": [x.to_json() for x in v.violations]}
    if v.warnings:
        rec["warnings"] = [x.to_json() for x in v.warnings]
    if v.preference_score is not None:  # as check's JSON, only for a cell with preferences
        rec["preferences"] = v.preference_score.to_json(v.preferences)
    if v.reason:
        rec["reason"] = v.reason
    return rec


def _repair(cell: Cell, layout: Layout, o: dict[str, Any]) -> dict[str, Any]:
    r = repair(cell, layout, time_limit=o.get("time_limit", 10.0))
    before = r.before.violations if r.before is not None else ()
    verdict = {"optimal": "pass", "feasible": "pass", "infeasible": "fail"}.get(r.status,
                                                                             "unknown")
    rec: dict[str, Any] = {"verdict": verdict, "violations": [x.to_json() for x in before],
                           "status": r.status, "already_valid": r.already_valid,
                           "moved": [m.part for m in r.moves]}
    if r.status not in FOUND and r.reason:
        rec["reason"] = r.reason
    if r.layout is not None and not r.already_valid:
        rec["layout"] = r.layout  # the client writes it to --out-dir and drops it here
    return rec


def _plan(cell: Cell, layout: Layout, o: dict[str, Any]) -> dict[str, Any]:
    r = plan(cell, layout, time_limit=o.get("time_limit", 10.0))
    verdict = {"optimal": "pass", "infeasible": "fail"}.get(r.status, "unknown")
    rec: dict[str, Any] = {"verdict": verdict, "violations": [], "status": r.status}
    if r.status == Status.OPTIMAL:
        rec["order"] = list(r.order)
    elif r.reason:
        rec["reason"] = r.reason
    return rec


def settle_available() -> str | None:
    """None when this build has the physics settle test, else why not (said by ``--verb
    settle`` before any work)."""
    try:
        # lazy: the twin extra (pybullet); its absence is reported here
        from cellspec.robots import settle  # noqa: F401
    except ImportError:
        return ("--verb settle is not available in this build: cellspec.robots.settle "
                "(the pybullet settle test, `cellspec settle`) is not installed")
    if not hasattr(settle, "settle"):
        return ("--verb settle is not available in this build: cellspec.robots.settle has "
                "no settle() function")
    return None


def _settle(cell: Cell, layout: Layout, o: dict[str, Any]) -> dict[str, Any]:
    """The pybullet settle test (``cellspec.robots.settle``): ``stand`` is a pass, ``fall``
    a fail naming the part that fell first."""
    r = _s.settle(cell, layout)
    out = r.to_json()
    first = out.get("first_fall") or {}
    violations = []
    if r.verdict == "fall":
        violations.append({"rule": "settle", "parts": [first.get("part")],
                           "message": out.get("message", ""), "source": "pybullet settle"})
    return {"verdict": "pass" if r.verdict == "stand" else "fail", "violations": violations,
            "settle": {"verdict": r.verdict, "first_fall": out.get("first_fall"),
                       "message": out.get("message")}}


_VERB_FUNCS = {"check": _check, "repair": _repair, "plan": _plan, "settle": _settle}

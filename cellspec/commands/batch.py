"""cellspec batch: check (or repair, plan, settle) many layouts against one cell, on Dask.

One JSON line per layout, in input order, then ``N pass, N fail, N unknown, N bad input``.
Runs on an embedded LocalCluster by default, on an existing Dask cluster with
``--scheduler`` (or ``DASK_SCHEDULER_ADDRESS``), or in this process with ``--serial``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from cellspec import __version__
from cellspec.commands.common import (
    EXIT_FAIL,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    add_shared,
    atomic_write,
)
from cellspec.core.errors import CellspecError
from cellspec.core.extras import require_extra
from cellspec.core.io import AtomicOutput
from cellspec.core.limits import DEFAULT_MAX_MEMORY, check_output, check_seconds, parse_memory
from cellspec.core.status import Status

KINDS = ("pass", "fail", "unknown", "bad input", "error")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``batch`` verb."""
    c = sub.add_parser(
        "batch", help="check many layouts against one cell, on Dask",
        description="Run a verb on every layout (layout files, directories of them, JSON-lines "
        "files with one layout per line, or - for JSON lines on stdin) and write one JSON line "
        "per layout (id, verdict, violations, seconds) in input order, then a summary line. "
        "Runs on an embedded Dask LocalCluster (one worker process per CPU), on an existing "
        "cluster with --scheduler, or in process with --serial. Exit 0 all pass, 1 any fail, "
        "2 bad input or unknown (in any layout, or in the command), 3 a layout hit an internal "
        "error or crashed its worker (the batch is still complete).")
    add_shared(c, cell=True, fmt="json",
               output=("FILE", "write the JSON lines here (atomically, when the batch is done)"),
               fmt_help="json (default): one JSON object per line; pretty: one line per layout",
               time_limit=(10.0, "--verb repair/plan/settle: time limit per layout (default "
                           "10): the solver's limit; the layout is stopped (unknown) at "
                           "the limit plus a grace of at most 1 s"), max_memory=True)
    for act in c._actions:  # the shared option, with what it means here
        if act.dest == "max_memory":
            act.help = ("memory each layout may use beyond its worker's own, e.g. 512M or "
                        "4G (default 2G; unknown when a layout would exceed it). --verb "
                        "check runs layouts in the worker itself unless --timeout or "
                        "--max-memory is given")
    c.add_argument("layouts", nargs="+", metavar="LAYOUTS",
                   help="layout .json files, directories, .jsonl files, or - (stdin)")
    c.add_argument("--verb", choices=("check", "repair", "plan", "settle"), default="check",
                   help="what to run per layout (default check)")
    c.add_argument("--out-dir", metavar="DIR",
                   help="--verb repair: write each repaired layout here as NNNNNN-ID.json")
    where = c.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="an existing Dask scheduler, e.g. tcp://10.0.0.5:8786 (default: "
                       "$DASK_SCHEDULER_ADDRESS, else an embedded LocalCluster)")
    where.add_argument("--serial", action="store_true", help="run in this process, no Dask")
    c.add_argument("--workers", type=int, default=None, metavar="N",
                   help="worker processes of the embedded LocalCluster (default: one per CPU)")
    c.add_argument("--chunk", type=int, default=None, metavar="N",
                   help="layouts per task (default: adaptive, about 0.5 s of work per task)")
    c.add_argument("--connect-timeout", type=float, default=5.0, metavar="S",
                   help="give up on a scheduler that cannot be reached or does not answer like "
                   "one after S seconds (default 5)")
    c.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="--verb check: time limit per layout (verdict unknown when hit)")
    c.add_argument("--no-timings", action="store_true",
                   help="leave out seconds, so equal inputs give byte-identical output")
    c.add_argument("--stats", action="store_true",
                   help="print a JSON line of run statistics (chunks, workers, peak memory "
                   "per worker) on stderr at the end")
    c.set_defaults(func=run)


def _validate(a: argparse.Namespace) -> None:
    # lazy: CLI start-up time (every verb loads for --help; loads the batch runner)
    from cellspec.batch.inputs import check_paths

    if a.workers is not None and a.workers < 1:
        raise CellspecError("--workers must be at least 1")
    if a.chunk is not None and a.chunk < 1:
        raise CellspecError("--chunk must be at least 1")
    if a.workers is not None and (a.serial or a.scheduler):
        raise CellspecError("--workers sizes the embedded LocalCluster; it cannot go with "
                            + ("--serial" if a.serial else "--scheduler"))
    check_seconds(a.connect_timeout, "--connect-timeout", most=600)
    check_seconds(a.time_limit)
    a.max_memory_bytes = None if a.max_memory is None else parse_memory(a.max_memory)
    if a.timeout is not None:
        check_seconds(a.timeout, "--timeout")
    if a.out_dir is not None and a.verb != "repair":
        raise CellspecError("--out-dir is for --verb repair (where the repaired layouts go)")
    check_output(a.output, "-o")
    if a.out_dir is not None:
        d = Path(a.out_dir)
        if d.exists() and not d.is_dir():
            raise CellspecError(f"--out-dir {a.out_dir}: is a file, not a directory")
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CellspecError(f"--out-dir {a.out_dir}: {exc.strerror}") from None
        if not os.access(d, os.W_OK):
            raise CellspecError(f"--out-dir {a.out_dir}: not writable")
    check_paths(a.layouts)
    if a.verb == "settle":
        require_extra("twin", verb="batch --verb settle")
        # lazy: CLI start-up time (every verb loads for --help; loads the batch runner)
        from cellspec.batch.work import settle_available

        why = settle_available()
        if why:
            raise CellspecError(why)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    # lazy: CLI start-up time (every verb loads for --help; loads the batch runner, textX)
    from cellspec.batch import stream
    from cellspec.batch.cluster import dask_client, scheduler_address, worker_peak_memory
    from cellspec.batch.inputs import iter_items
    from cellspec.batch.work import (
        CellPlugin,
        close_sandboxes,
        error_record,
        install_cell,
        layout_bound,
        pack_cell,
        run_chunk,
        warm,
    )
    from cellspec.dsl.parser import load_cell

    _validate(a)
    address = None if a.serial else scheduler_address(a.scheduler)
    t0 = time.perf_counter()
    cell = load_cell(a.cell)
    key, blob = pack_cell(cell)
    options: dict[str, Any] = {"timeout": a.timeout, "time_limit": a.time_limit,
                               "bound": layout_bound(a.verb, a.time_limit, a.timeout,
                                                     a.max_memory_bytes, DEFAULT_MAX_MEMORY)}
    prefix = (key, a.verb, options, __version__)
    items = iter_items(a.layouts)
    stats = stream.Stats()
    writer = _Writer(a)
    extra: dict[str, Any] = {}
    try:
        if a.serial:
            warm(install_cell(key, blob))
            extra["startup_s"] = round(time.perf_counter() - t0, 3)
            writer.write_all(stream.serial_map(run_chunk, prefix, items, a.chunk, stats))
            extra["workers"] = 0
        else:
            with dask_client(address, a.workers, a.connect_timeout) as client:
                if not client.nthreads():
                    print("note: the scheduler has no workers yet; waiting for one",
                          file=sys.stderr)
                name = f"cellspec-cell-{key[:16]}"
                client.register_plugin(CellPlugin(key, blob, __version__), name=name)
                extra["startup_s"] = round(time.perf_counter() - t0, 3)
                results = stream.dask_map(
                    client, run_chunk, prefix, items,
                    on_error=lambda it, why: error_record(it, f"not run: {why}"),
                    chunk=a.chunk, stats=stats, tag=f"cellspec-{a.verb}")
                writer.write_all(results)
                extra["workers"] = len(client.nthreads())
                if a.stats:
                    extra["worker_peak_bytes"] = worker_peak_memory(client)
                try:
                    client.unregister_worker_plugin(name)
                except Exception:  # noqa: BLE001 - a worker gone meanwhile is no error
                    pass
    except BaseException:
        writer.abort()
        raise
    finally:
        close_sandboxes()  # --serial: the sandbox child of this process's layouts
    wall = time.perf_counter() - t0
    writer.finish(wall)
    if a.stats:
        print(json.dumps({"layouts": stats.items, "chunks": stats.chunks,
                          "reruns": stats.reruns, "wall_s": round(wall, 3),
                          "work_s": round(stats.work_seconds, 3),
                          "chunk_max": max(stats.chunk_sizes, default=0), **extra}),
              file=sys.stderr)
    c = writer.counts
    if c["error"]:
        return EXIT_INTERNAL
    if c["bad input"] or c["unknown"]:
        return EXIT_INPUT
    return EXIT_FAIL if c["fail"] else EXIT_OK


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class _Writer:
    """Writes records as they arrive (stdout, or a temporary file renamed at the end),
    repaired layouts to --out-dir, progress on a terminal, and counts verdicts."""

    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.counts = dict.fromkeys(KINDS, 0)
        self.n = 0
        self.out: AtomicOutput | None = None
        self.fh: Any = sys.stdout
        if a.output:  # core/io's rules: a device in place, through a symlink, mode kept
            self.out = AtomicOutput(a.output, "-o")
            self.fh = self.out
        # progress on a terminal, unless the records go to that same terminal
        self.progress = sys.stderr.isatty() and (bool(a.output) or not sys.stdout.isatty())
        self.last = 0.0

    def write_all(self, records) -> None:
        for rec in records:
            self.write(rec)

    def write(self, rec: dict[str, Any]) -> None:
        self.n += 1
        self.counts[rec["verdict"]] += 1
        layout = rec.pop("layout", None)
        if layout is not None and self.a.out_dir:
            name = f"{self.n:06d}-{_UNSAFE.sub('_', rec['id'])[-100:]}.json"
            path = Path(self.a.out_dir) / name
            atomic_write(path, json.dumps(layout, indent=2) + "\n")
            rec["output"] = str(path)
        seconds = rec.pop("seconds", None)
        if not self.a.no_timings and seconds is not None:
            rec["seconds"] = seconds
        if self.a.format == "json":
            self.fh.write(json.dumps(rec) + "\n")
        else:
            self.fh.write(_pretty(rec) + "\n")
        if self.progress and time.monotonic() - self.last > 0.5:
            self.last = time.monotonic()
            print(f"\r{self.n} layouts done", end="", file=sys.stderr, flush=True)

    def summary(self, wall: float) -> str:
        c = self.counts
        s = (f"{c['pass']} pass, {c['fail']} fail, {c['unknown']} unknown, "
             f"{c['bad input']} bad input")
        if c["error"]:
            s += f", {c['error']} error"
        if not self.a.no_timings:
            rate = self.n / wall if wall > 0 else 0.0
            s += f" ({self.n} layouts, {wall:.2f} s, {rate:.1f} layouts/s)"
        return s

    def finish(self, wall: float) -> None:
        if self.progress:
            print("\r\033[K", end="", file=sys.stderr)
        line = self.summary(wall)
        if self.out is not None:
            self.out.commit()
            print(line)
        elif self.a.format == "pretty":
            print(line)
        else:  # stdout stays pure JSON lines
            sys.stdout.flush()
            print(line, file=sys.stderr)

    def abort(self) -> None:
        if self.out is not None:
            self.out.abort()


def _pretty(rec: dict[str, Any]) -> str:
    v = rec["verdict"]
    if v == "bad input":
        return f"{rec['id']}: bad input: " + "; ".join(rec.get("errors", []))
    if v == "error":
        return f"{rec['id']}: error: {rec.get('error', '')}"
    found = ", ".join(f"{x['rule']}({', '.join(x['parts'])})" for x in rec["violations"])
    tail = f": {found}" if found and v == Status.FAIL else (f": {rec['reason']}"
                                                       if rec.get("reason") else "")
    return f"{rec['id']}: {v}{tail}"

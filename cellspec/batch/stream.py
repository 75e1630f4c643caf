"""Map a function over a stream of items in chunks, on Dask or in process, and yield the
results in input order with bounded memory.

At most ``ahead`` chunks are out (submitted, running or waiting to be written), so the
reorder buffer never holds more than ``ahead`` chunks of results whatever the batch size.
Results come back as they complete (``distributed.as_completed``). A chunk whose task fails
(its worker was killed more often than the scheduler retries, or the task itself raised)
is run again one item at a time (one such item in flight at a time); an item that still
fails gets ``on_error(item, reason)`` as its result, so nothing is lost or duplicated.
With ``chunk=None`` the chunk size adapts so that a chunk takes about ``target`` seconds of
work (task overhead then stays far below 10 %).
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

FIRST_CHUNK = 4
MAX_CHUNK = 2000
TARGET_SECONDS = 0.5


def timed(fn: Callable[..., list[Any]], *args: Any) -> tuple[float, list[Any]]:
    """Run ``fn(*args)`` on the worker: (seconds of work, its results)."""
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


@dataclass
class Stats:
    """What a run did: items, chunks submitted, single-item re-runs, work seconds (summed
    over workers), the chunk sizes used."""

    items: int = 0
    chunks: int = 0
    reruns: int = 0
    work_seconds: float = 0.0
    chunk_sizes: list[int] = field(default_factory=list)


class ChunkSizer:
    """A fixed chunk size, or one that adapts: ``FIRST_CHUNK`` until the first results,
    then about ``target`` seconds of measured work per chunk."""

    def __init__(self, fixed: int | None, target: float = TARGET_SECONDS):
        self.fixed, self.target = fixed, target
        self.per_item: float | None = None

    def size(self) -> int:
        if self.fixed:
            return self.fixed
        if self.per_item is None:
            return FIRST_CHUNK
        return int(min(MAX_CHUNK, max(1, self.target / max(self.per_item, 1e-6))))

    def observe(self, seconds: float, n: int) -> None:
        if n:
            x = seconds / n
            self.per_item = x if self.per_item is None else 0.7 * self.per_item + 0.3 * x


def serial_map(fn: Callable[..., list[Any]], prefix: tuple[Any, ...], items: Iterable[Any],
               chunk: int | None = None, stats: Stats | None = None) -> Iterator[Any]:
    """In process: the same chunks and results as :func:`dask_map`, no cluster."""
    sizer = ChunkSizer(chunk)
    it = iter(items)
    while True:
        batch = list(itertools.islice(it, sizer.size()))
        if not batch:
            return
        seconds, out = timed(fn, *prefix, batch)
        sizer.observe(seconds, len(batch))
        if stats is not None:
            stats.items += len(batch)
            stats.chunks += 1
            stats.work_seconds += seconds
            stats.chunk_sizes.append(len(batch))
        yield from out


def dask_map(client: Any, fn: Callable[..., list[Any]], prefix: tuple[Any, ...],
             items: Iterable[Any], on_error: Callable[[Any, str], Any],
             chunk: int | None = None, ahead: int | None = None,
             stats: Stats | None = None, tag: str = "cellspec") -> Iterator[Any]:
    """``fn(*prefix, chunk_items)`` over every chunk on the cluster; one result per item,
    in input order, yielded as soon as every earlier item's result is in."""
    # lazy: the dask extra; only batch/test on a cluster need it
    from distributed import as_completed

    stats = stats if stats is not None else Stats()
    sizer = ChunkSizer(chunk)
    if ahead is None:
        threads = sum(client.nthreads().values()) or 1
        ahead = 4 * threads + 4
    run_id = f"{tag}-{uuid.uuid4().hex[:10]}"
    source = iter(items)
    exhausted = False
    slots: dict[int, list[Any]] = {}  # chunk index -> results (None until in)
    missing: dict[int, int] = {}  # chunk index -> results still out
    chunks: dict[int, list[Any]] = {}  # chunk index -> its items (for single re-runs)
    futures: dict[Any, tuple[int, int | None]] = {}  # future -> (chunk, item or None)
    ac = as_completed(loop=client.loop)
    # items of failed chunks, re-run alone and one at a time: a worker killed by one of them
    # then takes no innocent item with it (Dask counts a death against every task the
    # worker held, queued ones too)
    quarantine: deque[tuple[int, int]] = deque()
    quarantine_busy = False
    next_chunk = next_write = 0

    def submit(idx: int, part: list[Any], k: int | None) -> None:
        key = f"{run_id}-{idx}" if k is None else f"{run_id}-{idx}-{k}"
        fut = client.submit(timed, fn, *prefix, part, key=key, pure=False)
        futures[fut] = (idx, k)
        ac.add(fut)

    def refill() -> None:
        nonlocal next_chunk, exhausted
        while not exhausted and next_chunk - next_write < ahead:
            batch = list(itertools.islice(source, sizer.size()))
            if not batch:
                exhausted = True
                return
            chunks[next_chunk] = batch
            slots[next_chunk] = [None] * len(batch)
            missing[next_chunk] = len(batch)
            stats.items += len(batch)
            stats.chunks += 1
            stats.chunk_sizes.append(len(batch))
            submit(next_chunk, batch, None)
            next_chunk += 1

    refill()
    try:
        for fut in ac:
            idx, k = futures.pop(fut)
            batch = chunks[idx]
            if k is not None:
                quarantine_busy = False
            try:
                seconds, out = fut.result()
            except Exception as exc:  # the task failed: re-run its items one at a time
                fut.release()
                if k is None and len(batch) > 1:
                    quarantine.extend((idx, j) for j in range(len(batch)))
                else:
                    j = 0 if k is None else k
                    slots[idx][j] = on_error(batch[j], _reason(exc))
                    missing[idx] -= 1
            else:
                fut.release()
                stats.work_seconds += seconds
                sizer.observe(seconds, len(out))
                if k is None:
                    slots[idx] = list(out)
                    missing[idx] = 0
                else:
                    slots[idx][k] = out[0]
                    missing[idx] -= 1
            if quarantine and not quarantine_busy:
                qi, qj = quarantine.popleft()
                stats.reruns += 1
                quarantine_busy = True
                submit(qi, [chunks[qi][qj]], qj)
            while next_write in missing and missing[next_write] == 0:
                results = slots.pop(next_write)
                del missing[next_write], chunks[next_write]
                next_write += 1
                yield from results
            refill()
    finally:
        pending = list(futures)
        if pending:
            client.cancel(pending)


def _reason(exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "KilledWorker":
        return ("the worker running it died (killed or crashed) on every try, so the "
                "scheduler gave up on it")
    text = str(exc).strip().splitlines()
    return f"{name}: {text[0]}" if text else name

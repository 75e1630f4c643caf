"""Where a batch runs: a Dask client on an existing cluster (``--scheduler ADDRESS`` or
``DASK_SCHEDULER_ADDRESS``) or on an embedded ``LocalCluster`` (worker processes on
127.0.0.1, one thread each, no dashboard). A scheduler that cannot be reached is bad input
(exit 2) within the connect timeout, never a hang or a traceback.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import resource
from collections.abc import Iterator
from typing import Any

from cellspec.core.errors import CellspecError

ENV_SCHEDULER = "DASK_SCHEDULER_ADDRESS"
DEFAULT_CONNECT_TIMEOUT = 5.0
_ADDRESS = re.compile(r"^(?:(tcp|tls|ws|wss)://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+):(\d{1,5})$")


def machine_workers() -> int:
    """Worker processes for a machine: one per CPU this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def scheduler_address(flag: str | None) -> str | None:
    """The scheduler to use: ``--scheduler``, else ``DASK_SCHEDULER_ADDRESS``, else None
    (an embedded LocalCluster); a malformed address is bad input."""
    addr = flag if flag is not None else os.environ.get(ENV_SCHEDULER) or None
    if addr is None:
        return None
    src = "--scheduler" if flag is not None else ENV_SCHEDULER
    m = _ADDRESS.match(addr.strip())
    if not m or not 0 < int(m.group(3)) < 65536:
        raise CellspecError(f"{src} {addr!r}: expected a Dask scheduler address such as "
                            "tcp://10.0.0.5:8786 (protocol://host:port)")
    return addr.strip() if m.group(1) else f"tcp://{addr.strip()}"


def _need_distributed() -> Any:
    try:
        # lazy: the dask extra; only batch/test on a cluster need it
        import distributed
    except ImportError:
        raise CellspecError("running on Dask needs dask distributed: pip install "
                            "'cellspec[dask]' (or use --serial)") from None
    return distributed


@contextlib.contextmanager
def dask_client(address: str | None, workers: int | None = None,
                connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> Iterator[Any]:
    """A connected ``distributed.Client``: to ``address``, or to a LocalCluster of
    ``workers`` processes (default: one per CPU) torn down on exit."""
    distributed = _need_distributed()
    # lazy: the dask extra; only batch/test on a cluster need it
    import dask

    if address is not None:
        with dask.config.set({"distributed.comm.timeouts.connect": f"{connect_timeout}s"}):
            try:
                client = distributed.Client(address, timeout=connect_timeout,
                                            set_as_default=False)
            except (OSError, TimeoutError, ValueError) as exc:
                raise CellspecError(f"cannot reach the Dask scheduler at {address} within "
                                    f"{connect_timeout:g} s: {_short(exc)}") from None
        try:
            yield client
        finally:
            client.close()
        return
    n = workers or machine_workers()
    # a task that keeps killing its worker fails after 2 tries (not the default 4); the
    # batch then runs that chunk's layouts one by one and names the culprit.
    # measured (bench/batch_scale.py): Dask's statistical profiler (a thread walking the
    # worker's stack every 10 ms) and its aggressive malloc trimming made a layout cost
    # nearly twice the CPU it costs in process; neither is needed for short solver tasks
    cfg = {"distributed.scheduler.allowed-failures": 1,
           "distributed.worker.profile.enabled": False,
           "distributed.nanny.pre-spawn-environ": {"OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1,
                                                   "OPENBLAS_NUM_THREADS": 1}}
    with dask.config.set(cfg):
        cluster = distributed.LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None, silence_logs=logging.ERROR)
    try:
        client = distributed.Client(cluster, set_as_default=False)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def worker_peak_memory(client: Any) -> dict[str, int]:
    """Peak resident memory (bytes) of every worker process, by worker address."""
    return client.run(_peak_rss)


def _peak_rss() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

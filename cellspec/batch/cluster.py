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
import socket
import struct
import time
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
        probe_scheduler(address, connect_timeout)  # bad peers: exit 2 in time, no traceback
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


MAX_HANDSHAKE = 1 << 16  # bytes: a Dask handshake is a few hundred


def _recv_exactly(sock: socket.socket, n: int, deadline: float) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        b = sock.recv(n - len(buf))
        if not b:
            raise ConnectionResetError("the peer closed the connection")
        buf += b
    return bytes(buf)


def probe_scheduler(address: str, timeout: float) -> None:
    """Bad input (exit 2) unless ``address`` (``tcp://``) answers like a Dask scheduler
    within ``timeout`` seconds: a Dask peer sends its handshake (a length-prefixed msgpack
    dict) as soon as it accepts. A peer that stays silent, sends garbage (Dask itself would
    read a frame length of exabytes and fail with out of memory) or closes is named; other
    protocols (tls, ws) are left to Dask."""
    m = _ADDRESS.match(address)
    if not m or (m.group(1) or "tcp") != "tcp":
        return
    host, port = m.group(2).strip("[]"), int(m.group(3))
    deadline = time.monotonic() + timeout
    head = f"cannot use the Dask scheduler at {address}"
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:  # as Dask would say it (a timeout is an OSError too)
        why = "timed out" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise CellspecError(f"cannot reach the Dask scheduler at {address} within "
                            f"{timeout:g} s: {why}") from None
    try:
        with sock:
            (n,) = struct.unpack("<Q", _recv_exactly(sock, 8, deadline))
            if not 0 < n <= MAX_HANDSHAKE:
                raise CellspecError(f"{head}: the peer is not a Dask scheduler (its first "
                                    f"message claims {n} bytes; a Dask handshake has a few "
                                    "hundred)")
            info = _handshake(_recv_exactly(sock, n, deadline))
            if not isinstance(info, dict) or "pickle-protocol" not in info:
                raise CellspecError(f"{head}: the peer is not a Dask scheduler (its first "
                                    "message is no Dask handshake)")
    except TimeoutError:
        raise CellspecError(f"{head}: it accepted the connection but sent no Dask "
                            f"handshake within {timeout:g} s (--connect-timeout); is it a "
                            "Dask scheduler?") from None
    except OSError as exc:
        raise CellspecError(f"{head}: {exc.strerror or exc} (is it a Dask "
                            "scheduler?)") from None


def _handshake(frames_bytes: bytes) -> Any:
    """The handshake dict from a Dask message's frames (None when they do not decode)."""
    try:
        # lazy: the dask extra; only batch/test on a cluster need it
        import msgpack
        from distributed.protocol.utils import unpack_frames

        frames = unpack_frames(frames_bytes)
        return msgpack.loads(frames[0], raw=False, strict_map_key=False) if frames else None
    except Exception:  # noqa: BLE001 - garbage of any kind: not a Dask peer
        return None


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

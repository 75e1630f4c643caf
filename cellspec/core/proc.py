"""Child processes that die with their parent: a worker is never left running (parent 1)
after the process that started it was killed, even by ``kill -9``.

Two mechanisms, both armed in the child: Linux's ``prctl(PR_SET_PDEATHSIG, SIGKILL)``
(the kernel kills the child when its parent exits), and, portable, a pipe whose write end
only the parent holds: a daemon thread in the child blocks reading it and ends the child
when it reads end of file (the parent is gone, however it died).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading

PR_SET_PDEATHSIG = 1
ORPHAN_EXIT = 87  # a worker's exit code when it ended because its parent was gone


def set_pdeathsig(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent exits (Linux only;
    False where unavailable)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


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


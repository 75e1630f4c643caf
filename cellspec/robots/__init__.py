"""The pybullet digital twin: robot models, IK, collision checks and motion planning.

Core modules (imported explicitly, so ``import cellspec.robots`` stays cheap):
``models`` (RobotSpec, robot_spec, MODELS), ``urdf`` (generated ABB arms, grippers),
``twin`` (Twin: one persistent DIRECT pybullet client per cell, kinematic only),
``ik`` (solve_ik, grasp_quat), ``collision`` (CollisionChecker, Contact) and
``motion`` (plan_motion: RRT-Connect over one or several arms). See docs/twin.md.
"""

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator

from cellspec.core.extras import require


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Send what C code writes on file descriptor 1 to /dev/null for the duration: pybullet
    prints banners there, and stdout carries data (JSON)."""
    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        yield
        try:
            ctypes.CDLL(None).fflush(None)
        except (OSError, AttributeError):
            pass
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def quiet_pybullet() -> None:
    """Import pybullet with its build-time banner kept off stdout (stdout carries data); a
    missing pybullet is :class:`~cellspec.core.extras.MissingExtra` naming the twin extra."""
    if sys.modules.get("pybullet") is not None:
        return
    with quiet_stdout():
        require("pybullet", extra="twin")

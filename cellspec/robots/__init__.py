"""The pybullet digital twin: robot models, IK, collision checks and motion planning.

Core modules (imported explicitly, so ``import cellspec.robots`` stays cheap):
``models`` (RobotSpec, robot_spec, MODELS), ``urdf`` (generated ABB arms, grippers),
``twin`` (Twin: one persistent DIRECT pybullet client per cell, kinematic only),
``ik`` (solve_ik, grasp_quat), ``collision`` (CollisionChecker, Contact) and
``motion`` (plan_motion: RRT-Connect over one or several arms). See docs/twin.md.
"""


def quiet_pybullet() -> None:
    """Import pybullet with its build-time banner kept off stdout (stdout carries data)."""
    import sys

    if "pybullet" in sys.modules:
        return
    import ctypes
    import os

    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        import pybullet  # noqa: F401

        try:
            ctypes.CDLL(None).fflush(None)
        except (OSError, AttributeError):
            pass
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)

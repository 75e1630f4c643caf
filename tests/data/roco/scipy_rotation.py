"""A numpy stand-in for the two names of ``scipy.spatial.transform`` the vendored RoCo
parser imports (``Rotation``, ``Slerp``), so its oracle runs without scipy (not a
dependency of cellspec). Same conventions as scipy: quaternions scalar-last (x, y, z, w),
normalised on input; ``Slerp`` interpolates along the relative rotation vector.
"""

from __future__ import annotations

import numpy as np


def _compose(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The Hamilton product p * q of stacks of scalar-last quaternions."""
    pv, pw, qv, qw = p[:, :3], p[:, 3:], q[:, :3], q[:, 3:]
    v = pw * qv + qw * pv + np.cross(pv, qv)
    w = pw * qw - np.sum(pv * qv, axis=1, keepdims=True)
    return np.hstack([v, w])


class Rotation:
    """A stack of rotations as unit quaternions (what the parser uses of scipy's)."""

    def __init__(self, quat: np.ndarray, single: bool) -> None:
        self._quat = quat / np.linalg.norm(quat, axis=1, keepdims=True)
        self._single = single

    @classmethod
    def from_quat(cls, quat) -> Rotation:
        q = np.asarray(quat, dtype=float)
        return cls(q.reshape(-1, 4).copy(), q.ndim == 1)

    @classmethod
    def from_rotvec(cls, rotvec) -> Rotation:
        v = np.asarray(rotvec, dtype=float).reshape(-1, 3)
        angle = np.linalg.norm(v, axis=1)
        small = angle <= 1e-3
        scale = np.empty_like(angle)
        a2 = angle[small] ** 2
        scale[small] = 0.5 - a2 / 48 + a2 * a2 / 3840
        scale[~small] = np.sin(angle[~small] / 2) / angle[~small]
        return cls(np.hstack([scale[:, None] * v, np.cos(angle / 2)[:, None]]), False)

    @classmethod
    def concatenate(cls, rotations) -> Rotation:
        return cls(np.vstack([r._quat for r in rotations]), False)

    def __len__(self) -> int:
        return len(self._quat)

    def __getitem__(self, idx) -> Rotation:
        q = self._quat[idx]
        return Rotation(q.reshape(-1, 4), q.ndim == 1)

    def __mul__(self, other: Rotation) -> Rotation:
        return Rotation(_compose(self._quat, other._quat), self._single and other._single)

    def inv(self) -> Rotation:
        q = self._quat.copy()
        q[:, 3] *= -1  # as scipy: -conjugate, the same rotation
        return Rotation(q, self._single)

    def as_quat(self) -> np.ndarray:
        return self._quat[0].copy() if self._single else self._quat.copy()

    def as_rotvec(self) -> np.ndarray:
        q = self._quat.copy()
        q[q[:, 3] < 0] *= -1
        angle = 2 * np.arctan2(np.linalg.norm(q[:, :3], axis=1), q[:, 3])
        small = angle <= 1e-3
        scale = np.empty_like(angle)
        a2 = angle[small] ** 2
        scale[small] = 2 + a2 / 12 + 7 * a2 * a2 / 2880
        scale[~small] = angle[~small] / np.sin(angle[~small] / 2)
        out = scale[:, None] * q[:, :3]
        return out[0] if self._single else out


class Slerp:
    """Spherical linear interpolation between key rotations at increasing ``times``."""

    def __init__(self, times, rotations: Rotation) -> None:
        self.times = np.asarray(times, dtype=float)
        self.timedelta = np.diff(self.times)
        self.rotations = rotations[:-1]
        self.rotvecs = (rotations[:-1].inv() * rotations[1:]).as_rotvec().reshape(-1, 3)

    def __call__(self, times) -> Rotation:
        t = np.asarray(times, dtype=float)
        single = t.ndim == 0
        t = np.atleast_1d(t)
        ind = np.searchsorted(self.times, t) - 1
        ind[ind < 0] = 0
        alpha = (t - self.times[ind]) / self.timedelta[ind]
        r = Rotation(self.rotations._quat[ind], False) * \
            Rotation.from_rotvec(self.rotvecs[ind] * alpha[:, None])
        return Rotation(r._quat, single)

"""PNG snapshots of the twin with pybullet's TinyRenderer (no OpenGL, no new dependency).

``getCameraImage(..., renderer=ER_TINY_RENDERER)`` gives RGBA pixels; :func:`write_png`
encodes them with ``zlib`` and ``struct`` from the standard library (8-bit RGB, filter 0).
The camera looks at the workspace centre from the front-left, above; the image is the
same for the same scene (the renderer is deterministic).
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import numpy as np

from cellspec.dsl.model import Cell

WIDTH, HEIGHT = 640, 480


def write_png(path: str | os.PathLike[str], rgb: np.ndarray) -> None:
    """Write an (H, W, 3) uint8 array as a PNG file (atomically)."""
    rgb = np.ascontiguousarray(rgb[:, :, :3], dtype=np.uint8)
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp")
    tmp.write_bytes(png)
    os.replace(tmp, p)


def render(cid: int, cell: Cell, width: int = WIDTH, height: int = HEIGHT) -> np.ndarray:
    """An RGB image of a pybullet client's scene, looking at the cell."""
    # lazy: the twin extra (pybullet)
    import pybullet as p

    lo = np.array([float(v) for v in cell.workspace.lo])
    hi = np.array([float(v) for v in cell.workspace.hi])
    pts = [lo, hi] + [np.array([float(v) for v in r.base]) for r in cell.robots]
    allp = np.array(pts)
    c = (allp.min(axis=0) + allp.max(axis=0)) / 2
    span = float(np.max(allp.max(axis=0) - allp.min(axis=0))) + 0.6
    view = p.computeViewMatrixFromYawPitchRoll(cameraTargetPosition=c.tolist(),
                                               distance=1.3 * span, yaw=30, pitch=-35, roll=0,
                                               upAxisIndex=2)
    proj = p.computeProjectionMatrixFOV(fov=50, aspect=width / height, nearVal=0.05,
                                        farVal=20.0)
    img = p.getCameraImage(width, height, view, proj, renderer=p.ER_TINY_RENDERER,
                           physicsClientId=cid)
    rgba = np.reshape(np.asarray(img[2], dtype=np.uint8), (height, width, 4))
    return rgba[:, :, :3]


def snapshot_client(cid: int, cell: Cell, path: str | os.PathLike[str]) -> None:
    """Render a pybullet client's scene to a PNG file."""
    write_png(path, render(cid, cell))


def snapshot_twin(twin, path: str | os.PathLike[str]) -> None:
    """Render the twin (robots at their current joints, parts where they are) to a PNG."""
    snapshot_client(twin.client, twin.cell, path)

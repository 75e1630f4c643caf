"""URDF generation: the ABB arms from their kinematics (capsules), grippers on any arm.

``abb_urdf_path(spec)`` writes the bare ABB arm (links ``base_link``, ``link_1`` …
``link_6``; all joint frames parallel to the base at q = 0, joint 1 about z, 2, 3 and 5
about y, 4 and 6 about x, as in ABB's convention: positive axis 2 leans forward, positive
axis 3 lowers the forearm). ``robot_urdf(spec, gripper)`` adds to any arm a ``tool0``
flange frame (z out of the flange), the gripper and the ``tcp`` link:

* vacuum: a cup (link ``cup``, capsule radius 0.02 m) 0.10 m long; the TCP is the cup face.
* parallel: a palm (link ``palm``, 0.05 m tall) and two jaws (``finger_l`` at +x,
  ``finger_r`` at −x, 0.012 m thick) held open at the cell's ``opening`` and
  ``max(0.05, depth + 0.02)`` m long; the TCP is between the finger tips, so a top grasp
  of a part puts the TCP ``depth`` below the part's top face.

Files are cached in ``$TMPDIR/cellspec-twin/`` under a hash of their text (written
atomically; identical inputs give identical files).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np
import pybullet_data

from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.dsl.urdf import PALM_HEIGHT as PALM_HEIGHT
from cellspec.dsl.urdf import VACUUM_LENGTH as VACUUM_LENGTH
from cellspec.dsl.urdf import escapes, finger_length, resolve_mesh
from cellspec.robots.spec import TOOL_LINK, RobotSpec

VACUUM_RADIUS = 0.02
FINGER_THICKNESS = 0.012
FINGER_WIDTH = 0.02


@dataclass(frozen=True)
class GripperGeom:
    """The gripper to attach: kind, jaw opening and grasp depth (metres)."""

    kind: str  # "vacuum" | "parallel"
    opening: float = 0.07
    depth: float = 0.02

    @property
    def finger_length(self) -> float:
        """Length of a parallel jaw below the palm."""
        return finger_length(self.depth)

    @property
    def tcp_offset(self) -> float:
        """Distance from the flange to the TCP along the tool z axis."""
        if self.kind == "vacuum":
            return VACUUM_LENGTH
        return PALM_HEIGHT + self.finger_length

    def links(self) -> tuple[str, ...]:
        """Names of the gripper's links (with geometry)."""
        return ("cup",) if self.kind == "vacuum" else ("palm", "finger_l", "finger_r")


def _f(x: float) -> str:
    return f"{x:.6g}"


def _v(v) -> str:
    return " ".join(_f(float(x)) for x in v)


def _inertial(link: ET.Element) -> None:
    ine = ET.SubElement(link, "inertial")
    ET.SubElement(ine, "mass", value="0.5")
    ET.SubElement(ine, "inertia", ixx="0.001", ixy="0", ixz="0", iyy="0.001", iyz="0",
                  izz="0.001")


def _rpy_z_to(d: np.ndarray) -> tuple[float, float, float]:
    """Roll-pitch-yaw rotating the z axis onto direction d."""
    d = d / np.linalg.norm(d)
    pitch = math.atan2(math.hypot(d[0], d[1]), d[2])
    yaw = math.atan2(d[1], d[0])
    return (0.0, pitch, yaw)


def _capsule(link: ET.Element, p0, p1, r: float, rgba: str = "1 0.45 0 1") -> None:
    """A capsule of radius r whose segment runs from p0 to p1 (link frame)."""
    p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
    length = float(np.linalg.norm(p1 - p0))
    mid = (p0 + p1) / 2
    rpy = _rpy_z_to(p1 - p0) if length > 1e-9 else (0.0, 0.0, 0.0)
    for tag in ("visual", "collision"):
        el = ET.SubElement(link, tag)
        ET.SubElement(el, "origin", xyz=_v(mid), rpy=_v(rpy))
        geo = ET.SubElement(el, "geometry")
        if length > 1e-9:
            ET.SubElement(geo, "capsule", radius=_f(r), length=_f(length))
        else:
            ET.SubElement(geo, "sphere", radius=_f(r))
        if tag == "visual":
            mat = ET.SubElement(el, "material", name="")
            ET.SubElement(mat, "color", rgba=rgba)


def _box(link: ET.Element, centre, size, rgba: str = "0.3 0.3 0.3 1") -> None:
    for tag in ("visual", "collision"):
        el = ET.SubElement(link, tag)
        ET.SubElement(el, "origin", xyz=_v(centre), rpy="0 0 0")
        geo = ET.SubElement(el, "geometry")
        ET.SubElement(geo, "box", size=_v(size))
        if tag == "visual":
            mat = ET.SubElement(el, "material", name="")
            ET.SubElement(mat, "color", rgba=rgba)


def _link(root: ET.Element, name: str) -> ET.Element:
    link = ET.SubElement(root, "link", name=name)
    _inertial(link)
    return link


def _joint(root: ET.Element, name: str, kind: str, parent: str, child: str, xyz, rpy=(0, 0, 0),
           axis=None, lower: float = 0.0, upper: float = 0.0, vel: float = 1.0) -> None:
    j = ET.SubElement(root, "joint", name=name, type=kind)
    ET.SubElement(j, "parent", link=parent)
    ET.SubElement(j, "child", link=child)
    ET.SubElement(j, "origin", xyz=_v(xyz), rpy=_v(rpy))
    if axis is not None:
        ET.SubElement(j, "axis", xyz=_v(axis))
        ET.SubElement(j, "limit", effort="100", lower=_f(lower), upper=_f(upper),
                      velocity=_f(vel))


def _write(text: str, stem: str) -> str:
    """Write text to the cache dir under a content hash (atomic) and return its path."""
    d = os.path.join(tempfile.gettempdir(), "cellspec-twin")
    os.makedirs(d, exist_ok=True)
    h = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = os.path.join(d, f"{stem}-{h}.urdf")
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return path


def abb_urdf_text(spec: RobotSpec) -> str:
    """The URDF text of a bare ABB arm (capsules) from its spec's kinematics."""
    k = spec.abb
    if k is None:
        raise ValueError(f"{spec.model} is not a generated model")
    r = k.radii
    root = ET.Element("robot", name=spec.model)
    c = 0.4 * k.d4  # joint 4 sits along the forearm, 40% of the way to the wrist
    base = _link(root, "base_link")
    _capsule(base, (0, 0, r[0]), (0, 0, max(r[0], 0.55 * k.d1)), r[0])
    l1 = _link(root, "link_1")
    _capsule(l1, (0, 0, 0.6 * k.d1), (k.a1, 0, k.d1), r[1])
    l2 = _link(root, "link_2")
    _capsule(l2, (0, 0, 0), (0, 0, k.a2), r[2])
    l3 = _link(root, "link_3")
    if k.a3 > 1e-9:
        _capsule(l3, (0, 0, 0), (0, 0, k.a3), r[3])
    _capsule(l3, (-0.5 * r[3], 0, k.a3), (c, 0, k.a3), r[3])
    l4 = _link(root, "link_4")
    _capsule(l4, (0, 0, 0), (k.d4 - c - 1.3 * r[5], 0, 0), r[4])
    l5 = _link(root, "link_5")
    _capsule(l5, (0, -0.6 * r[5], 0), (0, 0.6 * r[5], 0), r[5])
    l6 = _link(root, "link_6")
    a, b = 0.5 * k.d6, k.d6 - r[6]
    _capsule(l6, (a, 0, 0), (max(a, b), 0, 0), r[6])
    lo, hi, vel = spec.lower, spec.upper, spec.vel_limits
    origins = [(0, 0, 0), (k.a1, 0, k.d1), (0, 0, k.a2), (c, 0, k.a3), (k.d4 - c, 0, 0),
               (0, 0, 0)]
    axes = [(0, 0, 1), (0, 1, 0), (0, 1, 0), (1, 0, 0), (0, 1, 0), (1, 0, 0)]
    names = ["base_link"] + [f"link_{i}" for i in range(1, 7)]
    for i in range(6):
        _joint(root, spec.joint_names[i], "revolute", names[i], names[i + 1], origins[i],
               axis=axes[i], lower=lo[i], upper=hi[i], vel=vel[i])
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


def dh_urdf_text(spec: RobotSpec) -> str:
    """The URDF text of a bare arm (capsules) from its spec's standard DH parameters.

    Joint i+1 sits at Tz(d_i)·Tx(a_i)·Rx(alpha_i) in link i's frame and turns about its z
    axis; each link is a capsule along d_i then a_i (UR's convention, e.g. the UR5e)."""
    k = spec.dh
    if k is None:
        raise ValueError(f"{spec.model} has no DH parameters")
    r = k.radii
    root = ET.Element("robot", name=spec.model)
    base = _link(root, "base_link")
    _capsule(base, (0, 0, r[0]), (0, 0, max(r[0], 0.5 * k.d[0])), r[0])
    names = ["base_link"] + [f"link_{i}" for i in range(1, 7)]
    for i in range(6):
        link = _link(root, names[i + 1])
        d, a = k.d[i], k.a[i]
        if i == 0:
            _capsule(link, (0, 0, 0.5 * d), (0, 0, d), r[1])
        elif abs(d) > 1e-9 and i < 5:
            _capsule(link, (0, 0, 0), (0, 0, d), r[i + 1])
        elif i == 5:
            _capsule(link, (0, 0, 0), (0, 0, max(0.0, d - r[6])), r[6])
        if abs(a) > 1e-9:
            _capsule(link, (0, 0, d), (a, 0, d), r[i + 1])
    lo, hi, vel = spec.lower, spec.upper, spec.vel_limits
    for i in range(6):
        if i == 0:
            xyz, rpy = (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
        else:
            xyz, rpy = (k.a[i - 1], 0.0, k.d[i - 1]), (k.alpha[i - 1], 0.0, 0.0)
        _joint(root, spec.joint_names[i], "revolute", names[i], names[i + 1], xyz, rpy,
               axis=(0, 0, 1), lower=lo[i], upper=hi[i], vel=vel[i])
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


def dh_urdf_path(spec: RobotSpec) -> str:
    """Path of the generated bare DH arm URDF (cached)."""
    return _write(dh_urdf_text(spec), spec.model)


def abb_urdf_path(spec: RobotSpec) -> str:
    """Path of the generated bare ABB arm URDF (cached)."""
    return _write(abb_urdf_text(spec), spec.model)


def arm_urdf_path(spec: RobotSpec) -> str:
    """The bare arm's URDF: the pybullet_data file, or a generated one (cached)."""
    if spec.data_urdf is not None:
        return os.path.join(pybullet_data.getDataPath(), spec.data_urdf)
    return dh_urdf_path(spec) if spec.dh is not None else abb_urdf_path(spec)


def _arm_root(spec: RobotSpec) -> ET.Element:
    """The bare arm's URDF tree: meshes resolved to absolute paths, stripped links gone."""
    src = arm_urdf_path(spec)
    root = ET.parse(src).getroot()
    base_dir = os.path.dirname(src)
    for mesh in root.iter("mesh"):
        fn = mesh.get("filename", "")
        found = resolve_mesh(fn, base_dir, spec.urdf_search)
        if found is None:  # the built-in data files: `package://` relative to the file
            if fn.startswith("package://"):
                fn = fn[len("package://"):]
                if escapes(fn):  # never a file outside the package (checked at load too)
                    raise CellspecError(Diagnostic(src, 0, 0, f"mesh {mesh.get('filename')!r}"
                                                   " leaves its package: refused"))
            if not os.path.isabs(fn):
                fn = os.path.normpath(os.path.join(base_dir, fn))
            found = fn
        mesh.set("filename", found)
    strip = set(spec.strip_links)
    for el in list(root):
        if el.tag == "link" and el.get("name") in strip:
            root.remove(el)
        elif el.tag == "joint":
            child = el.find("child")
            if child is not None and child.get("link") in strip:
                root.remove(el)
    return root


def _stem(model: str) -> str:
    """A file-name stem for a model name (``urdf:my arm.urdf`` -> ``urdf_my_arm.urdf``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", model)


def arm_text_path(spec: RobotSpec) -> str:
    """Path of the bare arm's URDF as cellspec loads it (meshes resolved; cached)."""
    root = _arm_root(spec)
    ET.indent(root)
    return _write(ET.tostring(root, encoding="unicode"), _stem(spec.model) + "_arm")


def robot_urdf_text(spec: RobotSpec, gripper: GripperGeom) -> str:
    """The arm's URDF with tool0, the gripper and the tcp link attached to the flange."""
    root = _arm_root(spec)
    tool0 = _link(root, "tool0")
    _joint(root, "flange_tool0", "fixed", spec.flange_link, "tool0", spec.flange_xyz,
           spec.flange_rpy)
    if gripper.kind == "vacuum":
        cup = _link(root, "cup")
        _capsule(cup, (0, 0, VACUUM_RADIUS), (0, 0, VACUUM_LENGTH - VACUUM_RADIUS),
                 VACUUM_RADIUS, rgba="0.2 0.2 0.8 1")
        _joint(root, "tool0_cup", "fixed", "tool0", "cup", (0, 0, 0))
    else:
        t, w, fl = FINGER_THICKNESS, FINGER_WIDTH, gripper.finger_length
        palm = _link(root, "palm")
        _box(palm, (0, 0, PALM_HEIGHT / 2), (gripper.opening + 2 * t, 0.04, PALM_HEIGHT))
        _joint(root, "tool0_palm", "fixed", "tool0", "palm", (0, 0, 0))
        for name, sign in (("finger_l", 1.0), ("finger_r", -1.0)):
            fin = _link(root, name)
            _box(fin, (0, 0, fl / 2), (t, w, fl), rgba="0.6 0.6 0.6 1")
            _joint(root, f"palm_{name}", "fixed", "palm", name,
                   (sign * (gripper.opening + t) / 2, 0, PALM_HEIGHT))
    del tool0
    tcp = ET.SubElement(root, "link", name=TOOL_LINK)
    _inertial(tcp)
    _joint(root, "tool0_tcp", "fixed", "tool0", TOOL_LINK, (0, 0, gripper.tcp_offset))
    root.set("name", _stem(f"{spec.model}_{gripper.kind}"))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


def robot_urdf(spec: RobotSpec, gripper: GripperGeom) -> str:
    """Path of the arm-with-gripper URDF (cached)."""
    return _write(robot_urdf_text(spec, gripper), _stem(f"{spec.model}_{gripper.kind}"))

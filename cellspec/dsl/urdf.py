"""A robot's own URDF, read and checked when the cell is loaded (``robot R urdf "F" tcp L``).

Only the XML is read here (no physics): the serial chain from the file's root link to the
``tcp`` link (the arm's flange, where cellspec attaches the cell's gripper; links below it,
e.g. the URDF's own hand, are dropped), its movable joints with their position and
velocity limits, and every mesh the kept links name. So a bad URDF is bad input at load
time for every verb, named by file, line and column of the offending element:

* not XML, no ``<robot>``, a link or joint without a name, a joint whose parent or child is
  not a link, a link that is the child of two joints (a closed loop) or a cycle;
* no link called ``tcp``'s name (the message lists the links there are);
* a joint on the chain of a type cellspec cannot drive (``floating``, ``planar``), or a
  ``revolute``/``prismatic`` joint without ``<limit lower upper velocity>``, or a
  ``continuous`` joint (no position limits: refused, since IK and planning need them);
* a mesh that does not exist (``package://PKG/rest`` is looked up as ``DIR/PKG/rest`` in
  each directory of the search path: ``--urdf-path`` / ``$CELLSPEC_URDF_PATH``, then the
  URDF's own folder and its parents; a ``..`` that leaves the package is refused), or
  that is not a mesh (an STL, OBJ or COLLADA file with triangles);
* two joints of one name; an ``<origin>``, ``<axis>``, ``<mass>``, ``<inertia>``,
  ``<limit>`` or geometry size that is not finite or is absurd (a negative mass or
  inertia, an origin of 1e308, limits of +-1e308, a zero axis): pybullet would crash;
* a file over ``MAX_URDF_BYTES`` or with more than ``MAX_LINKS`` links (pybullet's).

``reach_bound`` gives the robot's ``reach`` when the cell does not write one: the sum of
the joint offsets along the chain (an upper bound on the flange's distance from the first
joint) plus the gripper's length (``tool_length``, the same numbers the twin builds).
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
import xml.parsers.expat as expat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.io import TooLarge, read_bounded

MAX_URDF_BYTES = 20 * 1024 * 1024  # a URDF is text; meshes live in their own files
MAX_LINKS = 127  # pybullet holds a body of at most 128 links: the base and 127 more
MAX_COORD_M = 100.0  # an origin, a size: a robot cell is metres, not kilometres
MAX_ANGLE = 4 * math.pi  # |rpy|, a revolute joint's limits: two turns either way
MAX_VELOCITY = 1000.0  # rad/s or m/s
MAX_MASS_KG = 10_000.0
MAX_INERTIA = 1e6  # kg m^2
MESH_SUFFIXES = (".stl", ".obj", ".dae")
URDF_PATH_ENV = "CELLSPEC_URDF_PATH"
DRIVEN = ("revolute", "prismatic")

# The gripper cellspec attaches at the flange (robots/urdf.py builds it from these).
VACUUM_LENGTH = 0.10
PALM_HEIGHT = 0.05


def finger_length(depth: float) -> float:
    """Length of a parallel jaw below the palm for a grasp ``depth`` deep."""
    return max(0.05, depth + 0.02)


def tool_length(kind: str, depth: float) -> float:
    """Distance from the flange to the tool centre point along the tool axis (metres)."""
    return VACUUM_LENGTH if kind == "vacuum" else PALM_HEIGHT + finger_length(depth)


@dataclass(frozen=True)
class UrdfJoint:
    """A movable joint of the chain: name, type, position limits, velocity limit."""

    name: str
    kind: str
    lower: float
    upper: float
    velocity: float


@dataclass(frozen=True)
class UrdfChain:
    """The checked serial chain of a URDF, root link to the tcp (flange) link."""

    path: str
    robot_name: str
    root: str
    tcp: str
    links: tuple[str, ...]  # root .. tcp along the chain
    joints: tuple[UrdfJoint, ...]  # movable joints along the chain, in order
    below_tcp: tuple[str, ...]  # links hanging below the tcp link (dropped)
    chain_length: float  # sum of the joint origin offsets along the chain (m)
    search: tuple[str, ...]


class _Located:
    """An element tree built by expat, remembering each element's line and column."""

    def __init__(self) -> None:
        self.where: dict[int, tuple[int, int]] = {}
        self.tb = ET.TreeBuilder()
        self.px = expat.ParserCreate()
        self.px.StartElementHandler = self._start
        self.px.EndElementHandler = self.tb.end

    def _start(self, tag: str, attrs: dict[str, str]) -> None:
        el = self.tb.start(tag, attrs)
        self.where[id(el)] = (self.px.CurrentLineNumber, self.px.CurrentColumnNumber + 1)

    def parse(self, data: bytes) -> ET.Element:
        """The root element of ``data``; expat.ExpatError when it is not XML."""
        self.px.Parse(data, True)
        return self.tb.close()


def search_path(extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The directories ``package://`` is resolved against: ``extra``, then the environment."""
    env = tuple(d for d in os.environ.get(URDF_PATH_ENV, "").split(os.pathsep) if d)
    return tuple(extra) + env


def resolve_mesh(filename: str, urdf_dir: str, search: tuple[str, ...]) -> str | None:
    """The file a mesh ``filename`` of a URDF in ``urdf_dir`` names, or None if none exists."""
    if filename.startswith("file://"):
        filename = filename[len("file://"):]
    if filename.startswith("package://"):
        rest = filename[len("package://"):]
        if escapes(rest):
            return None
        dirs = list(search)
        d = Path(urdf_dir).resolve()
        dirs += [str(d)] + [str(a) for a in d.parents]
        for base in dirs:
            cand = os.path.normpath(os.path.join(base, rest))
            if os.path.isfile(cand):
                return cand
        return None
    cand = filename if os.path.isabs(filename) else os.path.join(urdf_dir, filename)
    cand = os.path.normpath(cand)
    return cand if os.path.isfile(cand) else None


def escapes(rest: str) -> bool:
    """A ``package://`` path (after the scheme) that is empty, absolute or has a ``..``: it
    could leave its package for any file, so it names none."""
    return not rest or os.path.isabs(rest) or ".." in Path(rest).parts


def _num(text: str | None) -> float | None:
    try:
        v = float(text) if text is not None else None
    except ValueError:
        return None
    return v if v is not None and math.isfinite(v) else None


def _xyz(el: ET.Element | None) -> tuple[float, float, float]:
    if el is None:
        return (0.0, 0.0, 0.0)
    parts = (el.get("xyz") or "0 0 0").split()
    vals = [_num(t) for t in parts]
    if len(vals) != 3 or any(v is None for v in vals):
        return (math.nan, math.nan, math.nan)
    return (float(vals[0]), float(vals[1]), float(vals[2]))  # type: ignore[arg-type]


def read_chain(path: str, tcp: str, search: tuple[str, ...] = ()) -> UrdfChain:
    """Read and check the chain of the URDF at ``path`` up to link ``tcp`` (cached per file
    version); CellspecError naming the file and element otherwise."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise CellspecError(Diagnostic(path, 0, 0, f"cannot read the URDF: {exc.strerror}")) \
            from None
    return _read_chain(os.path.abspath(path), tcp, search_path(search), st.st_mtime_ns,
                       st.st_size)


@lru_cache(maxsize=32)
def _read_chain(path: str, tcp: str, search: tuple[str, ...], _mtime: int,
                size: int) -> UrdfChain:
    return _Reader(path, search).chain(tcp, size)


class _Reader:
    """One URDF file read for its chain; ``bad`` locates a problem at an element."""

    def __init__(self, path: str, search: tuple[str, ...]) -> None:
        self.path, self.search, self.b = path, search, _Located()

    def bad(self, msg: str, el: ET.Element | None = None) -> CellspecError:
        line, col = self.b.where.get(id(el), (0, 0)) if el is not None else (0, 0)
        return CellspecError(Diagnostic(self.path, line, col, msg))

    def chain(self, tcp: str, size: int) -> UrdfChain:
        root = self._root(size)
        links = self._links(root)
        parent_of = self._parents(root, links)
        if tcp not in links:
            shown = ", ".join(sorted(links)[:12]) + (", ..." if len(links) > 12 else "")
            raise self.bad(f"no link '{tcp}' (the tcp link); the links are: {shown}", root)
        chain = self._path_to(tcp, parent_of)
        joints, length = self._joints(chain, parent_of)
        if not joints:
            raise self.bad(f"no movable joint between the root link '{chain[0]}' and '{tcp}'",
                           root)
        below = self._below(tcp, parent_of)
        self._values(root)
        self._meshes(links, set(below))
        return UrdfChain(path=self.path, robot_name=root.get("name", Path(self.path).stem),
                         root=chain[0], tcp=tcp, links=tuple(chain), joints=tuple(joints),
                         below_tcp=tuple(sorted(below)), chain_length=length,
                         search=self.search)

    def _root(self, size: int) -> ET.Element:
        if not os.path.isfile(self.path):
            raise self.bad("not a regular file (a URDF file was expected)")
        too_big = (f"the URDF is over {MAX_URDF_BYTES // 2**20} MiB; at most "
                   f"{MAX_URDF_BYTES // 2**20} MiB are read (meshes belong in their own files)")
        if size > MAX_URDF_BYTES:
            raise self.bad(too_big)
        try:
            root = self.b.parse(read_bounded(self.path, MAX_URDF_BYTES))
        except TooLarge:  # it grew after the size was taken
            raise self.bad(too_big) from None
        except OSError as exc:
            raise self.bad(f"cannot read the URDF: {exc.strerror}") from None
        except expat.ExpatError as exc:
            raise CellspecError(Diagnostic(self.path, exc.lineno, exc.offset + 1,
                                           "not a valid URDF (XML): "
                                           f"{expat.ErrorString(exc.code)}")) from None
        if root.tag != "robot":
            raise self.bad(f"not a URDF: the top element is <{root.tag}>, not <robot>", root)
        return root

    def _links(self, root: ET.Element) -> dict[str, ET.Element]:
        links: dict[str, ET.Element] = {}
        for el in root.findall("link"):
            name = el.get("name")
            if not name:
                raise self.bad("a <link> without a name", el)
            if name in links:
                raise self.bad(f"link '{name}' is defined twice", el)
            links[name] = el
            if len(links) > MAX_LINKS:
                raise self.bad(f"more than {MAX_LINKS} links: not a robot arm cellspec can "
                               "drive", el)
        return links

    def _parents(self, root: ET.Element, links: dict[str, ET.Element]
                 ) -> dict[str, tuple[str, ET.Element]]:
        """child link -> (parent link, joint), refusing unknown links and closed loops."""
        parent_of: dict[str, tuple[str, ET.Element]] = {}
        names: set[str] = set()
        for j in root.findall("joint"):
            jn = j.get("name")
            if not jn:
                raise self.bad("a <joint> without a name", j)
            if jn in names:
                raise self.bad(f"joint '{jn}' is defined twice", j)
            names.add(jn)
            par, chi = j.find("parent"), j.find("child")
            pl = par.get("link") if par is not None else None
            cl = chi.get("link") if chi is not None else None
            for role, ln in (("parent", pl), ("child", cl)):
                if ln not in links:
                    raise self.bad(f"joint '{jn}': its {role} link {ln!r} is not a <link> of "
                                   "the file", j)
            assert pl is not None and cl is not None
            if cl in parent_of:
                raise self.bad(f"joint '{jn}': link '{cl}' is already the child of joint "
                               f"'{parent_of[cl][1].get('name')}' (a closed loop; cellspec "
                               "drives serial chains only)", j)
            parent_of[cl] = (pl, j)
        return parent_of

    def _path_to(self, tcp: str, parent_of: dict[str, tuple[str, ET.Element]]) -> list[str]:
        chain, seen = [tcp], {tcp}
        while chain[-1] in parent_of:
            up = parent_of[chain[-1]][0]
            if up in seen:
                raise self.bad(f"the joints form a cycle through link '{up}'",
                               parent_of[chain[-1]][1])
            seen.add(up)
            chain.append(up)
        return chain[::-1]

    def _joints(self, chain: list[str], parent_of: dict[str, tuple[str, ET.Element]]
                ) -> tuple[list[UrdfJoint], float]:
        joints: list[UrdfJoint] = []
        length = 0.0
        for child in chain[1:]:
            j = parent_of[child][1]
            off = _xyz(j.find("origin"))
            if not all(math.isfinite(v) for v in off):
                raise self.bad(f"joint '{j.get('name')}': its <origin xyz> is not three finite "
                               "numbers", j)
            length += math.sqrt(sum(v * v for v in off))
            if j.get("type") != "fixed":
                joints.append(self._driven(j))
        return joints, length

    def _driven(self, j: ET.Element) -> UrdfJoint:
        jn, kind = j.get("name", ""), j.get("type", "")
        if kind == "continuous":
            raise self.bad(f"joint '{jn}' is continuous (no position limits); give it type "
                           "\"revolute\" with <limit lower upper velocity> to drive it", j)
        if kind not in DRIVEN:
            raise self.bad(f"joint '{jn}' has type {kind!r}; cellspec drives revolute and "
                           "prismatic joints (and keeps fixed ones)", j)
        lim = j.find("limit")
        lo = _num(lim.get("lower")) if lim is not None else None
        hi = _num(lim.get("upper")) if lim is not None else None
        vel = _num(lim.get("velocity")) if lim is not None else None
        if lim is None or lo is None or hi is None or vel is None:
            raise self.bad(f"joint '{jn}' has no <limit> with finite lower, upper and "
                           "velocity (IK, planning and timing need them)",
                           lim if lim is not None else j)
        if not lo < hi or vel <= 0:
            raise self.bad(f"joint '{jn}': its limits need lower < upper and velocity > 0 "
                           f"(got lower {lo:g}, upper {hi:g}, velocity {vel:g})", lim)
        return UrdfJoint(jn, kind, lo, hi, vel)

    @staticmethod
    def _below(tcp: str, parent_of: dict[str, tuple[str, ET.Element]]) -> list[str]:
        children: dict[str, list[str]] = {}
        for c, (par_link, _) in parent_of.items():
            children.setdefault(par_link, []).append(c)
        below: list[str] = []
        todo = list(children.get(tcp, ()))
        while todo:
            ln = todo.pop()
            below.append(ln)
            todo.extend(children.get(ln, ()))
        return below

    def _values(self, root: ET.Element) -> None:
        """Every number pybullet reads is finite and sane (else it crashes or hangs)."""
        for owner in root:
            if owner.tag not in ("link", "joint"):
                continue
            who = f"{owner.tag} '{owner.get('name')}'"
            for el in owner.iter():
                for attr, lo, hi, what in _BOUNDS.get(el.tag, ()):
                    if el.get(attr) is None:
                        continue
                    vals = [_num(t) for t in el.get(attr, "").split()]
                    n = 3 if attr in ("xyz", "rpy", "size", "scale") else 1
                    if (len(vals) != n or any(v is None or not lo <= v <= hi for v in vals)):
                        raise self.bad(f"{who}: <{el.tag} {attr}=\"{el.get(attr)}\">: "
                                       f"{what}", el)
                if el.tag == "axis" and owner.get("type") != "fixed" and el.get(
                        "xyz") is not None and not any(
                        _num(t) for t in el.get("xyz", "").split()):
                    raise self.bad(f"{who}: <axis xyz=\"{el.get('xyz')}\">: the axis is zero",
                                   el)
            if owner.tag == "joint":
                self._limit_range(owner, who)

    def _limit_range(self, j: ET.Element, who: str) -> None:
        lim = j.find("limit")
        if lim is None:
            return
        cap = MAX_ANGLE if j.get("type") in ("revolute", "continuous") else MAX_COORD_M
        unit = "rad" if cap == MAX_ANGLE else "m"
        for attr in ("lower", "upper"):
            v = _num(lim.get(attr)) if lim.get(attr) is not None else 0.0
            if v is None or abs(v) > cap:
                raise self.bad(f"{who}: <limit {attr}=\"{lim.get(attr)}\">: a position "
                               f"limit must be a finite number within +-{cap:.4g} {unit}", lim)

    def _meshes(self, links: dict[str, ET.Element], dropped: set[str]) -> None:
        urdf_dir = os.path.dirname(self.path)
        for name, el in links.items():
            if name in dropped:
                continue
            for mesh in el.iter("mesh"):
                fn = mesh.get("filename", "")
                if fn.startswith("package://") and escapes(fn[len("package://"):]):
                    raise self.bad(f"link '{name}': mesh {fn!r} leaves its package ('..' or "
                                   "an absolute path): refused", mesh)
                found = resolve_mesh(fn, urdf_dir, self.search)
                if found is not None:
                    why = not_a_mesh(found)
                    if why:
                        raise self.bad(f"link '{name}': mesh {fn!r} is not a mesh: {why}",
                                       mesh)
                if found is None:
                    hint = (f" (searched {URDF_PATH_ENV}/--urdf-path and the URDF's folders)"
                            if fn.startswith("package://") else "")
                    raise self.bad(f"link '{name}': mesh {fn!r} does not exist{hint}", mesh)


# element -> (attribute, least, greatest, what is wrong): checked on every link and joint
_BOUNDS: dict[str, tuple[tuple[str, float, float, str], ...]] = {
    "origin": (("xyz", -MAX_COORD_M, MAX_COORD_M,
                f"an origin must be three finite numbers within +-{MAX_COORD_M:g} m"),
               ("rpy", -MAX_ANGLE, MAX_ANGLE,
                f"a rotation must be three finite angles within +-{MAX_ANGLE:.4g} rad")),
    "axis": (("xyz", -1e6, 1e6, "an axis must be three finite numbers"),),
    "mass": (("value", 0.0, MAX_MASS_KG,
              f"a mass must be a finite number in [0, {MAX_MASS_KG:g}] kg"),),
    "inertia": tuple((k, 0.0 if k in ("ixx", "iyy", "izz") else -MAX_INERTIA, MAX_INERTIA,
                      "an inertia must be finite" + (", its diagonal >= 0"
                                                     if k in ("ixx", "iyy", "izz") else ""))
                     for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")),
    "limit": (("velocity", 0.0, MAX_VELOCITY,
               f"a velocity limit must be a finite number in [0, {MAX_VELOCITY:g}]"),
              ("effort", 0.0, 1e9, "an effort limit must be a finite number >= 0")),
    "box": (("size", 0.0, MAX_COORD_M, f"a box size must be three numbers in [0, "
             f"{MAX_COORD_M:g}] m"),),
    "cylinder": (("radius", 0.0, MAX_COORD_M, "a radius must be a finite number >= 0"),
                 ("length", 0.0, MAX_COORD_M, "a length must be a finite number >= 0")),
    "sphere": (("radius", 0.0, MAX_COORD_M, "a radius must be a finite number >= 0"),),
    "mesh": (("scale", -1e3, 1e3, "a mesh scale must be three finite numbers"),),
}


def not_a_mesh(path: str) -> str | None:
    """Why the file at ``path`` is not a mesh pybullet can load (STL, OBJ with faces,
    COLLADA), or None. Read only as far as needed."""
    suffix = Path(path).suffix.lower()
    if suffix not in MESH_SUFFIXES:
        return f"its suffix is {suffix or 'none'!r} (STL, OBJ or DAE expected)"
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            head = fh.read(1 << 20)
    except OSError as exc:
        return f"cannot read it: {exc.strerror}"
    if size == 0:
        return "the file is empty"
    if suffix == ".stl":
        if head.lstrip()[:5].lower() == b"solid" and b"facet" in head:
            return None
        if size >= 84:
            n = int.from_bytes(head[80:84], "little")
            if n > 0 and size == 84 + 50 * n:
                return None
        return "not an STL file (neither ASCII 'solid ... facet' nor binary with its count)"
    if suffix == ".obj":
        text = head.decode("utf-8", "replace")
        lines = [ln.split(None, 1)[0] for ln in text.splitlines() if ln.strip()]
        if lines.count("v") >= 3 and "f" in lines:
            return None
        return "not an OBJ file with vertices ('v') and faces ('f')"
    if b"<COLLADA" in head:
        return None
    return "not a COLLADA file (no <COLLADA> element)"


def reach_bound(chain: UrdfChain, gripper_kind: str, depth: float) -> float:
    """An upper bound on how far the tool centre point gets from the base (metres)."""
    return chain.chain_length + tool_length(gripper_kind, depth)

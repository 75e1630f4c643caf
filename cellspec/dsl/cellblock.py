"""The items of one ``cell { ... }`` block, checked one at a time: workspace, surfaces,
part types, robots, the default gripper, keep-out zones, friction, stability and the
contact tolerance (twin items go to twin.py, force thresholds to world.py).

One method per item kind keeps each item's checks, and their messages, in one place;
:meth:`CellItems.fields` then checks what needs every item (the workspace's axes, the
stability margin against the narrowest part type) and gives the fields of the Cell.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cellspec.core.errors import CellspecError
from cellspec.core.geometry import MAX_ABS_COORD_M, MAX_SIZE_M
from cellspec.dsl.model import (
    ROBOT_MODELS,
    BoxZone,
    Gripper,
    PartType,
    Robot,
    Surface,
    Zone,
    axis_box,
    unknown_model_message,
)
from cellspec.dsl.twin import TWIN_ITEMS, build_twin
from cellspec.dsl.urdf import UrdfChain, reach_bound, read_chain

if TYPE_CHECKING:  # the builder creates CellItems: a run-time import would be a cycle
    from cellspec.dsl.build import CellBuilder

MAX_PART_MASS_KG = 10_000  # beyond this a mass is a typo (and makes the stability LP ill-scaled)
RESERVED = ("workspace", "x", "y", "z", "vacuum", "parallel")  # names no item may take


class CellItems:
    """The items of one cell block as they are read; problems go to the builder ``b``."""

    def __init__(self, b: CellBuilder) -> None:
        self.b = b
        self.ws: dict[str, tuple[Fraction, Fraction]] = {}
        self.ws_seen: Any = None
        self.surfaces: list[Surface] = []
        self.ptypes: dict[str, PartType] = {}
        self.robots: list[Robot] = []
        self.keepouts: list[Zone] = []
        self.default: Gripper | None = None
        self.eps: Fraction | None = None
        self.friction: Fraction | None = None
        self.stab_seen = False
        self.stability_on = True
        self.margin: Fraction | None = None
        self.stab_item: tuple[Any, Fraction] | None = None
        self.names: dict[str, str] = {}
        self.twin_items: list[Any] = []
        self._handlers: dict[str, Callable[[Any], None]] = {
            "Workspace": self.workspace, "Surface": self.surface, "PartType": self.part_type,
            "Robot": self.robot, "DefaultGripper": self.default_gripper,
            "Keepout": self.keepout, "Friction": self.friction_item,
            "Stability": self.stability, "Tolerance": self.tolerance}

    def claim(self, obj: Any, name: str, what: str) -> bool:
        """Take ``name`` for a ``what`` (surface, robot, ...): one namespace for the cell."""
        if name in self.names:
            self.b.err(obj, f"{what} '{name}' clashes with the {self.names[name]} of the same "
                       "name")
            return False
        if name in RESERVED:
            self.b.err(obj, f"'{name}' is reserved and cannot name a {what}")
            return False
        self.names[name] = what
        return True

    def add(self, item: Any) -> None:
        """Read one item of the block (kinds other stages read, e.g. ``force``, are left)."""
        kind = type(item).__name__
        if kind in TWIN_ITEMS:
            self.twin_items.append(item)
            return
        handler = self._handlers.get(kind)
        if handler is not None:
            handler(item)

    # -- one method per item kind ----------------------------------------------
    def workspace(self, item: Any) -> None:
        """``workspace x [lo, hi] y [..] z [..]``."""
        b = self.b
        if self.ws_seen is not None:
            b.err(item, "workspace is given twice")
            return
        self.ws_seen = item
        for r in item.ranges:
            lo, hi = b.length(r, r.lo), b.length(r, r.hi)
            if r.axis in self.ws:
                b.err(r, f"workspace axis {r.axis} is given twice")
            elif lo >= hi:
                b.err(r, f"workspace {r.axis} range is empty: {r.lo} >= {r.hi}")
            self.ws[r.axis] = (lo, hi)

    def surface(self, item: Any) -> None:
        """``surface NAME z Z``."""
        b = self.b
        if self.claim(item, item.name, "surface"):
            self.surfaces.append(Surface(name=item.name, z=b.length(item, item.z),
                                         source=b.src(item)))

    def part_type(self, item: Any) -> None:
        """``part NAME size (x, y, z) [mass M]`` or ``part NAME cylinder radius R height H
        [mass M]`` (a vertical cylinder; its size is its bounding box)."""
        b = self.b
        radius = None
        if item.shape == "cylinder":
            radius, height = b.length(item, item.radius), b.length(item, item.height)
            if radius <= 0 or height <= 0:
                b.err(item, f"cylinder part type '{item.name}' needs a positive radius and "
                      "height")
                return
            size = (2 * radius, 2 * radius, height)
        else:
            size = b.vec(item.size)
        if any(s <= 0 for s in size):
            b.err(item, f"part type '{item.name}' needs a positive size on every axis")
            return
        mass = b.num(item.mass, item) if item.mass else None
        if mass is not None and mass <= 0:
            b.err(item, f"part type '{item.name}' needs a positive mass")
        elif mass is not None and mass > MAX_PART_MASS_KG:
            b.err(item, f"part type '{item.name}': mass {item.mass} kg is absurd for "
                  f"a part a robot places (at most {MAX_PART_MASS_KG} kg)")
        if self.claim(item, item.name, "part type"):
            self.ptypes[item.name] = PartType(name=item.name, size=size, mass=mass,
                                              source=b.src(item),
                                              shape="cylinder" if radius is not None else "box",
                                              radius=radius)

    def robot(self, item: Any) -> None:
        """``robot NAME MODEL at (x, y, z) [yaw D] [reach R] gripper ...``."""
        b = self.b
        g = b.gripper(item.gripper)
        reach = b.n(item.reach, item) if item.reach else None
        if reach is not None and reach <= 0:
            b.err(item, f"robot '{item.name}' needs a positive reach")
        model, urdf, tcp, offset = item.model, None, None, None
        if not item.urdf and model not in ROBOT_MODELS:
            b.err(item, unknown_model_message(item.name, model))
        if item.urdf:
            chain = self._urdf(item, g)
            if chain is None:
                return
            model, urdf, tcp = f"urdf:{Path(chain.path).name}", chain.path, chain.tcp
            offset = b.vec(item.offset) if item.offset else None
            if reach is None:  # derived from the chain (dsl/urdf.py: an upper bound)
                extra = float(sum(v * v for v in offset) ** 0.5) if offset else 0.0
                bound = reach_bound(chain, g.kind, float(g.depth or Fraction(1, 50))) + extra
                reach = Fraction(bound).limit_denominator(10**6) + Fraction(1, 10**6)
        if self.claim(item, item.name, "robot"):
            self.robots.append(Robot(name=item.name, model=model, base=b.vec(item.base),
                                     yaw_deg=b.num(item.yaw, item) if item.yaw else Fraction(0),
                                     reach=reach, gripper=g, source=b.src(item), urdf=urdf,
                                     tcp_link=tcp, tcp_offset=offset))

    def _urdf(self, item: Any, g: Gripper) -> UrdfChain | None:
        """The checked chain of ``robot R urdf "F" tcp L`` (F relative to the cell file),
        or None after reporting why not (a URDF's own errors name the URDF's line)."""
        b = self.b
        base = b.cur.path.parent if b.cur is not None else Path.cwd()
        path = Path(item.urdf)
        path = path if path.is_absolute() else base / path
        if not path.is_file():
            b.err(item, f"robot '{item.name}': no URDF file '{item.urdf}' (looked for {path})")
            return None
        try:
            return read_chain(str(path), item.tcp)
        except CellspecError as exc:
            for d in exc.diagnostics:
                b.sink.add(d.file, d.line, d.col, f"robot '{item.name}': {d.message}")
            return None

    def default_gripper(self, item: Any) -> None:
        """``default gripper ...``."""
        if self.default is not None:
            self.b.err(item, "default gripper is given twice")
        self.default = self.b.gripper(item.gripper)

    def keepout(self, item: Any) -> None:
        """``keepout NAME`` with axis ranges (a box) or a half-space."""
        b = self.b
        if not self.claim(item, item.name, "keep-out zone"):
            return
        if item.half is not None:
            z = b.halfspace(item)
            if z is not None:
                self.keepouts.append(z)
            return
        rs: dict[str, tuple[Fraction, Fraction]] = {}
        for r in item.ranges:
            lo, hi = b.length(r, r.lo), b.length(r, r.hi)
            if r.axis in rs:
                b.err(r, f"keep-out axis {r.axis} is given twice")
            if lo >= hi:
                b.err(r, f"keep-out {r.axis} range is empty: {r.lo} >= {r.hi}")
            rs[r.axis] = (lo, hi)
        # an omitted axis is unbounded: beyond any part a layout may hold, and
        # small enough for clingo's 32-bit integers
        big = Fraction(int(MAX_ABS_COORD_M + MAX_SIZE_M) + 1)
        self.keepouts.append(BoxZone(name=item.name, box=axis_box(rs, (-big, big)),
                                     source=b.src(item)))

    def friction_item(self, item: Any) -> None:
        """``friction MU`` (Coulomb)."""
        b = self.b
        if self.friction is not None:
            b.err(item, "friction is given twice")
        self.friction = self.b.num(item.mu, item)
        if self.friction <= 0:
            b.err(item, "friction must be positive: with frictionless contacts "
                  "nothing resists the smallest sideways push (e.g. friction 0.3)")
        elif self.friction > 10:
            b.err(item, f"friction {item.mu} is absurd: Coulomb coefficients of "
                  "real materials are below about 1.5 (at most 10 is accepted)")

    def stability(self, item: Any) -> None:
        """``stability margin M`` or ``stability off``."""
        b = self.b
        if self.stab_seen:
            b.err(item, "stability is given twice")
        self.stab_seen = True
        if item.off:
            self.stability_on = False
            return
        self.margin = b.length(item, item.margin)
        if self.margin < 0:
            b.err(item, "stability margin must not be negative")
        else:
            self.stab_item = (item, self.margin)

    def tolerance(self, item: Any) -> None:
        """``tolerance contact EPS``."""
        b = self.b
        if self.eps is not None:
            b.err(item, "tolerance contact is given twice")
        self.eps = b.n(item.eps, item)
        if self.eps < 0:
            b.err(item, "tolerance contact must not be negative")

    # -- the whole block -------------------------------------------------------
    def fields(self, st: Any) -> dict[str, Any]:
        """The checks that need every item, then the fields of :class:`Cell` they give."""
        b = self.b
        missing = [a for a in "xyz" if a not in self.ws]
        if self.ws_seen is None:
            b.err(st, f"cell '{st.name}' has no workspace: add `workspace x [..] y [..] z [..]`")
        elif missing:
            b.err(self.ws_seen, f"workspace lacks the {', '.join(missing)} range")
        workspace = axis_box(self.ws, (Fraction(0), Fraction(1)))
        default = self.default
        if default is None:
            default = self.robots[0].gripper if self.robots else Gripper(kind="parallel")
        if self.stab_item is not None and self.ptypes:
            item, m = self.stab_item
            narrow = min(self.ptypes.values(), key=lambda t: min(t.size[0], t.size[1]))
            half = min(narrow.size[0], narrow.size[1]) / 2
            if m >= half:
                b.err(item, f"stability margin {float(m):g} m leaves no room: part type "
                      f"'{narrow.name}' is {float(2 * half):g} m wide, so no contact of it "
                      f"could carry a load (the margin must be below {float(half):g} m)")
        return dict(
            workspace=workspace,
            surfaces=tuple(self.surfaces),
            part_types=self.ptypes,
            robots=tuple(self.robots),
            default_gripper=default,
            keepouts=tuple(self.keepouts),
            epsilon=self.eps if self.eps is not None else Fraction(1, 1000),
            friction=self.friction,
            stability_margin=self.margin,
            stability=self.stability_on,
            twin=build_twin(b, self.twin_items, tuple(r.name for r in self.robots),
                            self.ptypes, self.claim),
        )

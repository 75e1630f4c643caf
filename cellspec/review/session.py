"""The review session: the server-side state of one human review of a layout.

The browser only sends edits; this object validates each one like a layout file would
(NaN, infinities, absurd numbers, unknown ids and types become a message, never an
exception), applies it, and re-verifies the whole layout with the same engine as
``cellspec check`` (:func:`cellspec.solver.verify.check`). Repair runs the CP-SAT repair
(:func:`cellspec.solver.cpsat.repair.repair`) and can be undone; accept writes the layout
atomically, and only if it verifies.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cellspec.core.errors import CellspecError
from cellspec.core.geometry import MAX_ABS_COORD_M
from cellspec.core.io import atomic_write
from cellspec.core.status import FOUND, Status
from cellspec.dsl.model import Cell
from cellspec.layout import ID_PATTERN, MAX_ABS_YAW_DEG, Layout
from cellspec.solver.cpsat.repair import repair
from cellspec.solver.result import Verdict
from cellspec.solver.verify import check

AXES = ("x", "y", "z")
_ID_RE = re.compile(ID_PATTERN)
MAX_HISTORY = 200
MAX_SNAP_M = 1.0
ROTATE_STEP_DEG = 15.0  # one click of the page's rotate buttons


@dataclass(frozen=True)
class EditResult:
    """The outcome of one edit: applied or refused (with the reason), and the new verdict."""

    ok: bool
    message: str
    verdict: Verdict | None = None
    seconds: float = 0.0  # re-verification time of this edit


@dataclass(frozen=True)
class PartMove:
    """A part moved by a repair: from, to (centres, metres) and the distance."""

    part: str
    src: tuple[float, float, float]
    dst: tuple[float, float, float]
    how: str
    why: str

    @property
    def distance(self) -> float:
        """Euclidean length of the move, metres."""
        return math.dist(self.src, self.dst)


@dataclass(frozen=True)
class RepairOutcome:
    """What Repair did: the solver status, the moves (empty when nothing changed), why."""

    status: str
    message: str
    moves: tuple[PartMove, ...] = ()
    reordered: bool = False
    applied: bool = False
    verdict: Verdict | None = None
    seconds: float = 0.0


def _fmt(v: tuple[float, ...] | np.ndarray) -> str:
    return "(" + ", ".join(f"{float(x):.4f}" for x in v) + ")"


class ReviewSession:
    """One review of a layout against a cell: edits, verdicts, repair/undo, accept/reject."""

    def __init__(self, cell: Cell, layout: Layout, *, timeout: float | None = 30.0,
                 repair_time_limit: float = 10.0) -> None:
        """Start from a loaded cell and layout; verifies once (raises CellspecError for a
        layout the cell cannot check at all, e.g. an unknown part type)."""
        unknown = sorted({t for t in layout.types if t not in cell.part_types})
        if unknown:
            raise CellspecError(f"{layout.path}: unknown part type(s) {', '.join(unknown)}; "
                                f"the cell has {', '.join(sorted(cell.part_types))}")
        self.cell = cell
        self.path = layout.path
        self.timeout = timeout
        self.repair_time_limit = repair_time_limit
        self.ids: list[str] = list(layout.ids)
        self.types: list[str] = list(layout.types)
        self.pos = np.array(layout.pos, dtype=np.float64).reshape(-1, 3)
        self.size = np.array(layout.size, dtype=np.float64).reshape(-1, 3)
        self.grippers: list[str | None] = list(layout.grippers)
        self.yaw = np.array(layout.yaw, dtype=np.float64).reshape(-1)  # degrees about z
        self.order: list[str] | None = None if layout.order is None else list(layout.order)
        self.selected: tuple[str, ...] = ()
        self.snap: float = 0.0
        self.history: list[Layout] = []  # undo: earlier layouts
        self.last_repair: RepairOutcome | None = None
        self.decision: str | None = None  # "accept" | "reject"
        self.written: Path | None = None
        self.edits = 0
        self.verdict: Verdict = self._verify()
        self.verify_seconds = self.verdict.seconds

    # ----------------------------------------------------------------- state
    def layout(self) -> Layout:
        """The current layout as a frozen :class:`Layout` (metres)."""
        return Layout(ids=tuple(self.ids), types=tuple(self.types), pos=self.pos.copy(),
                      size=self.size.copy(), grippers=tuple(self.grippers),
                      order=None if self.order is None else tuple(self.order), path=self.path,
                      yaw=self.yaw.copy())

    def to_json(self) -> dict[str, Any]:
        """The current layout as the layout JSON object (docs/formats.md)."""
        return self.layout().to_json()

    def index(self, pid: str) -> int:
        """The row of part ``pid`` (CellspecError naming it when unknown)."""
        try:
            return self.ids.index(pid)
        except ValueError:
            raise CellspecError(f"unknown part '{pid}'") from None

    def sizes(self) -> np.ndarray:
        """Effective part sizes (the type's size where the layout gives none), metres."""
        return self.layout().resolve(self.cell)

    def status(self) -> dict[str, str]:
        """Each part's display status: selected, violating, warning or valid."""
        bad = {p for v in self.verdict.violations for p in v.parts}
        warn = {p for v in self.verdict.warnings for p in v.parts}
        sel = set(self.selected)
        out = {}
        for pid in self.ids:
            out[pid] = ("selected" if pid in sel else "violating" if pid in bad
                        else "warning" if pid in warn else "valid")
        return out

    def _verify(self) -> Verdict:
        return check(self.cell, self.layout(), timeout=self.timeout)

    def _restore(self, s: Layout) -> None:
        self.ids, self.types = list(s.ids), list(s.types)
        self.pos, self.size = s.pos.copy(), s.size.copy()
        self.grippers = list(s.grippers)
        self.yaw = np.array(s.yaw, dtype=np.float64).reshape(-1)
        self.order = None if s.order is None else list(s.order)
        self.selected = tuple(p for p in self.selected if p in self.ids)

    def _push(self) -> None:
        self.history.append(self.layout())
        del self.history[:-MAX_HISTORY]

    def _reverify(self, message: str) -> EditResult:
        t0 = time.perf_counter()
        self.verdict = self._verify()
        self.verify_seconds = time.perf_counter() - t0
        self.edits += 1
        return EditResult(True, message, self.verdict, self.verify_seconds)

    def _refuse(self, message: str) -> EditResult:
        return EditResult(False, message, self.verdict, 0.0)

    # ------------------------------------------------------------ validation
    @staticmethod
    def number(value: Any, what: str) -> float:
        """A finite coordinate in metres from user input (CellspecError otherwise)."""
        v = ReviewSession.finite(value, what)
        if abs(v) > MAX_ABS_COORD_M:
            raise CellspecError(f"{what}: {v:.6g} m is absurd (|coordinate| must be at most "
                                f"{MAX_ABS_COORD_M:g} m)")
        return v

    @staticmethod
    def finite(value: Any, what: str) -> float:
        """A finite number from user input: a number or its text (CellspecError otherwise)."""
        if isinstance(value, bool) or value is None:
            raise CellspecError(f"{what}: expected a number, got {value!r}")
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise CellspecError(f"{what}: '{value}' is not a number") from None
        try:
            v = float(value)
        except (TypeError, ValueError, OverflowError):
            raise CellspecError(f"{what}: expected a number, got {value!r}") from None
        if not math.isfinite(v):
            raise CellspecError(f"{what}: must be a finite number (NaN and infinity are not "
                                "positions)")
        return v

    def _snapped(self, v: float) -> float:
        if self.snap > 0:
            v = round(round(v / self.snap) * self.snap, 10)
        return v

    def _vec(self, pos: Any, what: str) -> np.ndarray:
        if isinstance(pos, str) or not hasattr(pos, "__len__") or len(pos) != 3:
            raise CellspecError(f"{what}: expected three numbers (x, y, z), got {pos!r}")
        return np.array([self._snapped(self.number(v, f"{what}.{a}"))
                         for v, a in zip(pos, AXES, strict=True)])

    # ----------------------------------------------------------------- edits
    def set_snap(self, step: Any) -> EditResult:
        """Snap grid for moves in metres (0 = off); the layout itself does not change."""
        try:
            v = self.number(step, "snap")
        except CellspecError as exc:
            return self._refuse(str(exc.diagnostics[0].message))
        if v < 0 or v > MAX_SNAP_M:
            return self._refuse(f"snap: {v:g} m; the grid step must be between 0 (off) and "
                                f"{MAX_SNAP_M:g} m")
        self.snap = v
        return EditResult(True, f"snap grid {v:g} m" if v else "snap grid off", self.verdict)

    def select(self, ids: Any) -> EditResult:
        """Select parts (for highlighting and for the part fields); unknown ids refused."""
        if isinstance(ids, str):
            ids = [ids]
        try:
            ids = tuple(dict.fromkeys(str(p) for p in ids))
        except TypeError:
            return self._refuse(f"select: expected part ids, got {ids!r}")
        unknown = [p for p in ids if p not in self.ids]
        if unknown:
            return self._refuse(f"select: unknown part(s) {', '.join(unknown)}")
        self.selected = ids
        return EditResult(True, f"selected {', '.join(ids)}" if ids else "selection cleared",
                          self.verdict)

    def move(self, pid: Any, pos: Any, yaw: Any = None) -> EditResult:
        """Move part ``pid`` to centre ``pos`` (snapped to the grid) and, when ``yaw`` is
        given, turn it to that many degrees (one edit, one undo step); then re-verify."""
        try:
            i = self.index(str(pid))
            p = self._vec(pos, str(pid))
            y = float(self.yaw[i]) if yaw is None else self._angle(yaw, f"{pid}.yaw")
        except CellspecError as exc:
            return self._refuse(exc.diagnostics[0].message)
        turned = y != self.yaw[i]
        if np.array_equal(p, self.pos[i]) and not turned:
            return EditResult(True, f"{pid} stays at {_fmt(p)}", self.verdict)
        self._push()
        self.pos[i] = p
        self.yaw[i] = y
        return self._reverify(f"moved {pid} to {_fmt(p)}"
                              + (f", yaw {y:g} deg" if turned else ""))

    def _angle(self, value: Any, what: str) -> float:
        """A yaw in degrees from user input, as a layout's (finite, |yaw| <= 3600)."""
        v = self.finite(value, what)
        if abs(v) > MAX_ABS_YAW_DEG:
            raise CellspecError(f"{what}: {v:.6g} degrees is absurd (|yaw| must be at most "
                                f"{MAX_ABS_YAW_DEG:g})")
        return round(v, 6) + 0.0  # no -0.0

    def set_coord(self, pid: Any, axis: str, value: Any) -> EditResult:
        """Set one coordinate (x, y or z) of part ``pid``, then re-verify."""
        if axis not in AXES:
            return self._refuse(f"unknown axis '{axis}' (x, y or z)")
        try:
            i = self.index(str(pid))
        except CellspecError as exc:
            return self._refuse(exc.diagnostics[0].message)
        p = [float(v) for v in self.pos[i]]
        p[AXES.index(axis)] = value
        return self.move(pid, p)

    def set_yaw(self, pid: Any, value: Any) -> EditResult:
        """Turn part ``pid`` to ``value`` degrees about the vertical axis (as a layout's
        ``yaw``: finite, |yaw| at most 3600), then re-verify."""
        try:
            i = self.index(str(pid))
            v = self._angle(value, f"{pid}.yaw")
        except CellspecError as exc:
            return self._refuse(exc.diagnostics[0].message)
        if v == self.yaw[i]:
            return EditResult(True, f"{pid} stays at yaw {v:g} deg", self.verdict)
        self._push()
        self.yaw[i] = v
        return self._reverify(f"turned {pid} to yaw {v:g} deg")

    def rotate(self, pid: Any, delta: Any = ROTATE_STEP_DEG) -> EditResult:
        """Turn part ``pid`` by ``delta`` degrees (counter-clockwise seen from above); the
        result is kept in (-180, 180]."""
        try:
            i = self.index(str(pid))
            d = self.finite(delta, "rotate")
        except CellspecError as exc:
            return self._refuse(exc.diagnostics[0].message)
        v = math.fmod(float(self.yaw[i]) + d, 360.0)
        v = v - 360.0 if v > 180.0 else v + 360.0 if v <= -180.0 else v  # (-180, 180]
        return self.set_yaw(pid, v)

    def add_part(self, ptype: Any, pos: Any = None, pid: Any = None) -> EditResult:
        """Add a part of a cell part type (default: centred over the workspace, resting on
        the lowest surface), with a fresh id unless one is given; re-verify."""
        ptype = str(ptype)
        if ptype not in self.cell.part_types:
            return self._refuse(f"unknown part type '{ptype}'; the cell has "
                                f"{', '.join(sorted(self.cell.part_types))}")
        if pid is None or pid == "":
            k = 1
            while f"{ptype}{k}" in self.ids:
                k += 1
            pid = f"{ptype}{k}"
        pid = str(pid)
        if not _ID_RE.match(pid):
            return self._refuse(f"{pid[:40]!r}: part ids are 1-128 characters: a letter or _ then "
                                "letters, digits, _ . -")
        if pid in self.ids:
            return self._refuse(f"a part '{pid}' already exists")
        if pos is None:
            ws = self.cell.workspace
            floor = min((s.z for s in self.cell.surfaces), default=ws.lo[2])
            half = self.cell.part_types[ptype].size[2] / 2
            p = np.array([float((ws.lo[0] + ws.hi[0]) / 2), float((ws.lo[1] + ws.hi[1]) / 2),
                          float(floor + half)])
            p = np.array([self._snapped(float(v)) for v in p])
        else:
            try:
                p = self._vec(pos, pid)
            except CellspecError as exc:
                return self._refuse(exc.diagnostics[0].message)
        self._push()
        self.ids.append(pid)
        self.types.append(ptype)
        self.pos = np.vstack([self.pos, p[None, :]])
        self.size = np.vstack([self.size, np.full((1, 3), np.nan)])
        self.grippers.append(None)
        self.yaw = np.append(self.yaw, 0.0)
        if self.order is not None:
            self.order.append(pid)
        self.selected = (pid,)
        return self._reverify(f"added {pid} ({ptype}) at {_fmt(p)}")

    def delete(self, pid: Any) -> EditResult:
        """Delete part ``pid`` (and its place in the order); re-verify."""
        try:
            i = self.index(str(pid))
        except CellspecError as exc:
            return self._refuse(exc.diagnostics[0].message)
        self._push()
        pid = self.ids.pop(i)
        self.types.pop(i)
        self.grippers.pop(i)
        self.pos = np.delete(self.pos, i, axis=0)
        self.size = np.delete(self.size, i, axis=0)
        self.yaw = np.delete(self.yaw, i)
        if self.order is not None:
            self.order.remove(pid)
        self.selected = tuple(p for p in self.selected if p != pid)
        return self._reverify(f"deleted {pid}")

    def set_order(self, order: Any) -> EditResult:
        """Replace the placement order (every part once; None or [] removes it); re-verify.

        A string is split at commas and white space."""
        if order is None or (isinstance(order, str) and not order.strip()) or order == []:
            new = None
        else:
            if isinstance(order, str):
                order = [t for t in re.split(r"[,\s]+", order.strip()) if t]
            try:
                new = [str(p) for p in order]
            except TypeError:
                return self._refuse(f"order: expected part ids, got {order!r}")
            unknown = [p for p in new if p not in self.ids]
            if unknown:
                return self._refuse(f"order: unknown part(s) {', '.join(unknown[:5])}")
            twice = sorted({p for p in new if new.count(p) > 1})
            if twice:
                return self._refuse(f"order: listed twice: {', '.join(twice[:5])}")
            missing = [p for p in self.ids if p not in set(new)]
            if missing:
                more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
                return self._refuse("order: must list every part once; missing "
                                    f"{', '.join(missing[:5])}{more}")
        if new == self.order:
            return EditResult(True, "order unchanged", self.verdict)
        self._push()
        self.order = new
        return self._reverify("order removed" if new is None else
                              "order: " + " ".join(new) if len(new) <= 20 else
                              f"order set ({len(new)} parts)")

    def shift_order(self, pid: Any, delta: int) -> EditResult:
        """Move part ``pid`` ``delta`` places later (negative: earlier) in the order; a
        layout without an order first gets the current part list as its order."""
        pid = str(pid)
        if pid not in self.ids:
            return self._refuse(f"unknown part '{pid}'")
        order = list(self.order) if self.order is not None else list(self.ids)
        k = order.index(pid)
        j = max(0, min(len(order) - 1, k + int(delta)))
        if j == k and self.order is not None:
            return self._refuse(f"{pid} is already {'first' if delta < 0 else 'last'}")
        order.insert(j, order.pop(k))
        return self.set_order(order)

    # ---------------------------------------------------------------- repair
    def repair(self, time_limit: float | None = None,
               progress: Callable[[str], None] | None = None) -> RepairOutcome:
        """Run the minimal-change CP-SAT repair (the same call as ``cellspec repair``; its
        progress lines go to ``progress``); apply it (undoable) when one was found."""
        tl = self.repair_time_limit if time_limit is None else time_limit
        t0 = time.perf_counter()
        try:
            r = repair(self.cell, self.layout(), time_limit=tl, progress=progress)
        except CellspecError as exc:
            out = RepairOutcome("error", f"repair refused: {exc.diagnostics[0].message}",
                                verdict=self.verdict, seconds=time.perf_counter() - t0)
            self.last_repair = out
            return out
        secs = time.perf_counter() - t0
        if r.already_valid:
            out = RepairOutcome(r.status, "already valid: nothing to repair",
                                verdict=self.verdict, seconds=secs)
        elif r.status in FOUND and r.layout is not None:
            self._push()
            rep = r.layout
            idx = {pid: i for i, pid in enumerate(self.ids)}
            for part in rep["parts"]:
                self.pos[idx[part["id"]]] = part["pos"]
            self.order = list(rep["order"]) if rep.get("order") is not None else self.order
            moves = tuple(PartMove(m.part, m.src, m.dst, m.how, m.why) for m in r.moves)
            self.verdict = self._verify()
            proof = "minimal" if r.status == Status.OPTIMAL else "not proved minimal"
            msg = (f"repaired: {len(moves)} part(s) moved, L1 {r.displacement:.4f} m, {proof}"
                   + ("; order re-sequenced" if r.reordered else ""))
            self.edits += 1
            out = RepairOutcome(r.status, msg, moves, r.reordered, True, self.verdict, secs)
        elif r.status == Status.INFEASIBLE:
            out = RepairOutcome(r.status, f"no repair exists: {r.reason}", verdict=self.verdict,
                                seconds=secs)
        else:
            out = RepairOutcome(r.status, f"repair undecided: {r.reason}", verdict=self.verdict,
                                seconds=secs)
        self.last_repair = out
        return out

    def undo(self) -> EditResult:
        """Undo the last edit or repair; re-verify."""
        if not self.history:
            return self._refuse("nothing to undo")
        self._restore(self.history.pop())
        self.last_repair = None
        return self._reverify("undone")

    # ------------------------------------------------------- accept / reject
    def accept(self, out: str | Path) -> EditResult:
        """Re-verify and, only on a pass, write the layout JSON atomically to ``out``."""
        if not self.ids:  # an empty layout verifies trivially: nothing was checked
            return EditResult(False, "not accepted: the layout has no parts; nothing written",
                              self.verdict)
        t0 = time.perf_counter()
        self.verdict = self._verify()
        secs = time.perf_counter() - t0
        if self.verdict.verdict != Status.PASS:
            why = (f"{len(self.verdict.violations)} violation(s)" if self.verdict.verdict ==
                   Status.FAIL else f"verdict unknown: {self.verdict.reason}")
            return EditResult(False, f"not accepted: the layout does not verify ({why}); "
                              "nothing written", self.verdict, secs)
        path = Path(out)
        try:
            atomic_write(path, json.dumps(self.to_json(), indent=2) + "\n")
        except CellspecError as exc:  # "cannot write PATH: why"
            return EditResult(False, f"not accepted: {exc.diagnostics[0].message}",
                              self.verdict, secs)
        self.decision = "accept"
        self.written = path
        return EditResult(True, f"accepted: written to {path}", self.verdict, secs)

    def reject(self) -> EditResult:
        """Reject the layout: nothing is written."""
        self.decision = "reject"
        return EditResult(True, "rejected: nothing written", self.verdict)

"""The review page: a viser server showing a :class:`ReviewSession` in 3D with a side panel.

The server owns the state (the session); the browser only sends edits (field changes,
button clicks, gizmo drags, clicks on parts). Every callback runs under one lock, reads
the widget's *current* value (so out-of-order thread-pool callbacks still end on the
latest value) and never raises into viser: a bad edit is a message in the panel.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cellspec.core.extras import require
from cellspec.core.severity import Severity
from cellspec.core.status import FOUND, Status
from cellspec.review.replay import Replay, ReplayPlan
from cellspec.review.robots import draw_robots, open_twin
from cellspec.review.scene import PartsView, draw_cell, scene_bounds
from cellspec.review.session import ROTATE_STEP_DEG, EditResult, ReviewSession

if TYPE_CHECKING:
    from cellspec.robots.twin import Twin
    from cellspec.solver.result import Violation

MAX_VIOLATION_ROWS = 25  # violations with their own select button; the rest are summarised
MAX_MD_ROWS = 100
PART_NONE = "(none)"
ROTATE_BUTTONS = (f"⟳ -{ROTATE_STEP_DEG:g}°", f"⟲ +{ROTATE_STEP_DEG:g}°")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """viser prints a banner and 'Server stopped' on stdout, which carries our data; the
    verb prints the address itself."""
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        yield


def _md_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("*", "\\*").replace("_", "\\_").replace("<", "&lt;")


# the select button's colour per row kind: errors red, warnings orange, unmet preferences
# (wishes, never a failure) grey
_ROW_COLOURS: dict[str, Any] = {"error": "red", "warning": "orange", "preference": "gray"}


def _row_prefix(x: Violation) -> str:
    """A row's kind before its rule: none for an error, ``warning:``, or an unmet
    preference with its weight (``preference (weight 3):``)."""
    if x.severity == Severity.WARNING:
        return "warning: "
    if x.severity == Severity.PREFERENCE:
        return f"preference (weight {x.weight}): "
    return ""


class ReviewApp:
    """A viser server for one review session; :meth:`wait` returns accept or reject."""

    def __init__(self, session: ReviewSession, output: str | Path, *, host: str = "127.0.0.1",
                 port: int = 8080, plan: ReplayPlan | None = None, robots: bool = True
                 ) -> None:
        """Prepare (not start) the page; ``output`` is where Accept writes the layout."""
        self.session = session
        self.output = Path(output)
        self.host = host
        self.port = port
        self.plan = plan
        self.robots = robots
        self.robot_note = ""
        self.twin: Twin | None = None
        self.robot_shapes: dict[str, Any] = {}
        self.robot_handles: dict[str, Any] = {}
        self.replay: Replay | None = None
        self.lock = threading.RLock()
        self.done = threading.Event()
        self.server: Any = None
        self._syncing = False
        self._violations_key: tuple = ()
        self._viol_rows: list[tuple[Any, Any]] = []
        self._viol_parts: list[tuple[str, ...]] = []
        self.md_viol_head: Any = None
        self._repair_rows: list[Any] = []
        self.message = _md_escape(f"loaded {len(session.ids)} part(s) from "
                                  f"{Path(session.path).name}")

    # ------------------------------------------------------------- lifecycle
    @property
    def url(self) -> str:
        """The page's address."""
        host = self.host if self.host not in ("0.0.0.0", "::") else "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.server.get_port()}/"

    def start(self) -> str:
        """Start the server, build the scene and the panel; returns the address."""
        viser = require("viser", extra="review")  # the review extra; says so when missing

        with _quiet():
            self.server = viser.ViserServer(host=self.host, port=self.port, verbose=False,
                                            label="cellspec review")
        srv = self.server
        srv.gui.configure_theme(control_width="large", show_logo=False,
                                show_share_button=False)
        srv.gui.main_panel.dock_right()
        srv.gui.set_panel_label(f"cellspec review: {self.session.cell.name}")
        srv.scene.set_up_direction("+z")
        lo, hi = scene_bounds(self.session.cell)
        ws = self.session.cell.workspace
        centre = np.array([float(ws.lo[k] + ws.hi[k]) / 2 for k in range(3)])
        span = float(max(hi[0] - lo[0], hi[1] - lo[1], 0.5))
        srv.initial_camera.look_at = tuple(float(v) for v in centre)
        srv.initial_camera.position = (float(centre[0]) - 0.25 * span,
                                       float(centre[1]) - 1.6 * span,
                                       float(centre[2]) + 1.1 * span)
        with srv.atomic():
            draw_cell(srv, self.session.cell)
            self.robot_note = self._draw_robots()
            self.parts = PartsView(srv)
            self.parts.on_pick = lambda pid: self._call(lambda: self._select([pid]))
            self._build_panel()
            # moves on x, y, z and turns about z only (a part's yaw; docs/shapes.md)
            self.parts.gizmo = srv.scene.add_transform_controls(
                "/gizmo", scale=0.12, visible=False,
                rotation_limits=((0.0, 0.0), (0.0, 0.0), (-1000.0, 1000.0)))
            self.parts.gizmo.on_update(self._dragged)
        self._refresh()
        return self.url

    def wait(self, timeout: float | None = None) -> str | None:
        """Block until Accept or Reject (or the timeout); returns the decision."""
        self.done.wait(timeout)
        return self.session.decision

    def wait_forever(self, poll: float = 0.2) -> str | None:
        """Block until Accept or Reject (Ctrl-C raises KeyboardInterrupt); the decision."""
        while not self.done.is_set():
            self.done.wait(poll)
        time.sleep(0.3)  # let the last panel update reach the browser
        return self.session.decision

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        if self.replay is not None:
            self.replay.playing = False
        if self.server is not None:
            with _quiet():
                self.server.stop()
            self.server = None
        if self.twin is not None:
            self.twin.close()
            self.twin = None

    def _draw_robots(self) -> str:
        why: str | None = "robots drawn as base markers only (--no-robots)"
        if self.robots and self.session.cell.robots:
            self.twin, why = open_twin(self.session.cell)
        note, self.robot_shapes, self.robot_handles = draw_robots(
            self.server, self.session.cell, self.twin, why)
        if self.plan is None and self.twin is not None:
            self.twin.close()  # only a replay needs it afterwards
            self.twin = None
        return note

    # ------------------------------------------------------------------ panel
    def _build_panel(self) -> None:
        gui = self.server.gui
        s = self.session
        self.md_verdict = gui.add_markdown("")
        self.md_message = gui.add_markdown("")
        self.f_viol = gui.add_folder("Violations")
        self.md_viol: Any = None
        self.md_viol_head = None
        with gui.add_folder("Selected part"):
            self.dd_part = gui.add_dropdown("part", self._part_options(), initial_value=PART_NONE)
            self.n_xyz = [gui.add_number(a, 0.0, step=0.0001) for a in ("x", "y", "z")]
            self.n_yaw = gui.add_number("yaw (deg)", 0.0, step=0.1,
                                        hint="turn about the vertical axis, degrees")
            self.bg_rotate = gui.add_button_group("rotate", ROTATE_BUTTONS)
            self.n_snap = gui.add_number("snap (m)", 0.0, min=0.0, max=1.0, step=0.0001,
                                         hint="snap grid for moves; 0 is off")
            self.bg_order = gui.add_button_group("order", ("earlier", "later"))
            self.b_delete = gui.add_button("Delete part", color="red")
        with gui.add_folder("Add part"):
            types = tuple(sorted(s.cell.part_types)) or ("(none)",)
            self.dd_type = gui.add_dropdown("type", types, initial_value=types[0])
            self.t_newid = gui.add_text("id", "", hint="optional; default TYPE + number")
            self.b_add = gui.add_button("Add part")
        with gui.add_folder("Order", expand_by_default=False):
            self.md_order = gui.add_markdown("")
            self.t_order = gui.add_text("new order", "", hint="ids separated by spaces or commas")
            self.b_set_order = gui.add_button("Set order")
            self.b_clear_order = gui.add_button("Remove order")
        with gui.add_folder("Repair"):
            self.b_repair = gui.add_button("Repair", color="violet",
                                           hint="minimal-change repair (CP-SAT), re-verified")
            self.b_undo = gui.add_button("Undo", hint="undo the last edit or repair")
            self.md_repair = gui.add_markdown("")
        self.b_accept = gui.add_button("Accept", color="green",
                                       hint=f"write the layout to {self.output} if it verifies")
        self.b_reject = gui.add_button("Reject", color="red", hint="exit 1, write nothing")
        self.md_help = gui.add_markdown(
            f"Drag the gizmo's arrows to move the selected part and its blue ring to turn it "
            f"about the vertical axis; the rotate buttons turn it by "
            f"{ROTATE_STEP_DEG:g}°. Accept writes `{_md_escape(str(self.output))}` (only a "
            f"verified layout). "
            f"{_md_escape(self.robot_note)}")
        if self.plan is not None:
            if self.twin is None:
                self.md_help.content += " Plan replay needs the robot models: not shown."
            else:
                self.replay = Replay(self, self.plan)
                self.replay.build(gui)

        self.dd_part.on_update(lambda _e: self._call(self._part_chosen))
        for k, h in enumerate(self.n_xyz):
            h.on_update(lambda _e, k=k: self._call(lambda: self._coord(k)))
        self.n_yaw.on_update(lambda _e: self._call(self._yaw))
        self.bg_rotate.on_click(lambda e: self._call(lambda: self._rotate(e.target.value)))
        self.n_snap.on_update(lambda _e: self._call(
            lambda: s.set_snap(self.n_snap.value)))
        self.bg_order.on_click(lambda e: self._call(lambda: self._shift(e.target.value)))
        self.b_delete.on_click(lambda _e: self._call(self._delete))
        self.b_add.on_click(lambda _e: self._call(
            lambda: s.add_part(self.dd_type.value, pid=self.t_newid.value.strip() or None)))
        self.b_set_order.on_click(lambda _e: self._call(
            lambda: s.set_order(self.t_order.value)))
        self.b_clear_order.on_click(lambda _e: self._call(lambda: s.set_order(None)))
        self.b_repair.on_click(lambda _e: self._call(self._repair))
        self.b_undo.on_click(lambda _e: self._call(s.undo))
        self.b_accept.on_click(lambda _e: self._call(self._accept))
        self.b_reject.on_click(lambda _e: self._call(self._reject))

    def _part_options(self) -> tuple[str, ...]:
        return (PART_NONE, *self.session.ids)

    # -------------------------------------------------------------- callbacks
    def _call(self, fn: Callable[[], Any]) -> None:
        """Run one edit under the lock; show its message; redraw. Never raises."""
        with self.lock:
            if self._syncing or self.session.decision is not None:
                return
            try:
                r = fn()
            except Exception as exc:  # a bug must not kill the server: say so in the panel
                r = EditResult(False, f"internal error ({type(exc).__name__}: {exc}); the "
                               "layout was not changed by this edit")
            if isinstance(r, EditResult):
                self.message = _md_escape(r.message) if r.ok else f"⚠ {_md_escape(r.message)}"
            self._refresh()
            if self.session.decision is not None:
                self.done.set()

    def _select(self, ids: list[str]) -> EditResult:
        return self.session.select(ids)

    def _part_chosen(self) -> EditResult | None:
        v = self.dd_part.value
        return self.session.select([] if v == PART_NONE else [v])

    def _current(self) -> str | None:
        sel = self.session.selected
        return sel[0] if len(sel) >= 1 else None

    def _coord(self, k: int) -> EditResult:
        pid = self._current()
        if pid is None:
            return EditResult(False, "select a part first")
        return self.session.set_coord(pid, "xyz"[k], self.n_xyz[k].value)

    def _yaw(self) -> EditResult:
        pid = self._current()
        if pid is None:
            return EditResult(False, "select a part first")
        return self.session.set_yaw(pid, self.n_yaw.value)

    def _rotate(self, which: str) -> EditResult:
        pid = self._current()
        if pid is None:
            return EditResult(False, "select a part first")
        return self.session.rotate(pid, -ROTATE_STEP_DEG if which == ROTATE_BUTTONS[0]
                                   else ROTATE_STEP_DEG)

    def _shift(self, which: str) -> EditResult:
        pid = self._current()
        if pid is None:
            return EditResult(False, "select a part first")
        return self.session.shift_order(pid, -1 if which == "earlier" else 1)

    def _delete(self) -> EditResult:
        pid = self._current()
        if pid is None:
            return EditResult(False, "select a part first")
        return self.session.delete(pid)

    def _dragged(self, event: Any) -> None:
        if getattr(event, "phase", "end") != "end":
            return

        def go() -> EditResult:
            pid = self._current()
            if pid is None:
                return EditResult(False, "select a part first")
            gizmo = self.parts.gizmo
            assert gizmo is not None  # only the gizmo's drags call this
            w, x, y, z = (float(v) for v in gizmo.wxyz)
            turn = math.degrees(math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))
            i = self.session.index(pid)
            old = float(self.session.yaw[i])
            d = math.remainder(turn - old, 360.0)  # the ring's turn, from the part's yaw
            yaw = None if abs(d) < 1e-6 else old + d
            return self.session.move(pid, [float(v) for v in gizmo.position], yaw)

        self._call(go)

    def _repair(self) -> EditResult:
        self.md_repair.content = "_repairing…_"
        t0 = time.perf_counter()

        def show(msg: str) -> None:  # progress in the panel once it takes more than 0.5 s
            if time.perf_counter() - t0 >= 0.5:
                self.md_repair.content = f"_{msg}_"

        r = self.session.repair(progress=show)
        return EditResult(r.status in FOUND, r.message, r.verdict, r.seconds)

    def _accept(self) -> EditResult:
        r = self.session.accept(self.output)
        if r.ok:
            return EditResult(True, r.message + "; the review is over, you can close this page",
                              r.verdict)
        return r

    def _reject(self) -> EditResult:
        r = self.session.reject()
        return EditResult(True, r.message + "; the review is over, you can close this page")

    # ---------------------------------------------------------------- refresh
    def _refresh(self) -> None:
        """Bring the panel and the scene in line with the session."""
        s = self.session
        v = s.verdict
        with self.server.atomic():
            self.parts.update(s)
            head = f"### verdict: {v.verdict}"
            if v.verdict == Status.FAIL:
                head += f" ({len(v.violations)} violation{'s' if len(v.violations) != 1 else ''})"
            elif v.verdict == Status.UNKNOWN:
                head += f": {_md_escape(v.reason or '')}"
            stats = (f"{len(s.ids)} parts · re-verified in {s.verify_seconds * 1000:.0f} ms · "
                     f"{s.edits} edit(s)")
            if v.warnings:
                stats += f" · {len(v.warnings)} warning(s)"
            if v.preferences:
                stats += f" · {len(v.preferences)} unmet preference(s)"
            if v.skipped_rules:
                stats += f" · not checked (no order): {', '.join(v.skipped_rules)}"
            if s.decision is not None:
                stats += f" · **{s.decision}ed**"
            notes = "".join(f"  \nnote: {_md_escape(n)}" for n in v.notes[:3])
            # the preference score (never part of pass/fail): only for a cell with preferences
            score = ("" if v.preference_score is None else
                     f"  \n{_md_escape(v.preference_score.sentence())}")
            self.md_verdict.content = head + "\n\n" + stats + score + notes
            self.md_message.content = self.message
            self._refresh_violations()
            self._sync_fields()
            o = s.order
            if o is None:
                self.md_order.content = "no order: order rules are not checked"
            else:
                shown = " ".join(o[:MAX_MD_ROWS]) + (" …" if len(o) > MAX_MD_ROWS else "")
                self.md_order.content = f"order ({len(o)}): {_md_escape(shown)}"
            self.b_undo.disabled = not s.history
            self._refresh_repair()
            if s.decision is not None:
                for b in (self.b_accept, self.b_reject, self.b_repair, self.b_undo,
                          self.b_add, self.b_delete):
                    b.disabled = True

    def _refresh_violations(self) -> None:
        """The violation list; rows (button + message) are reused and only relabelled, so
        an edit that changes one violation sends a few small updates, not a new list."""
        v = self.session.verdict
        key: tuple[tuple[object, ...], ...] = tuple((x.rule, x.parts, x.message, x.source)
                                                    for x in v.violations)
        key += tuple(("warning", x.rule, x.parts, x.message, x.source) for x in v.warnings)
        key += tuple(("preference", x.rule, x.parts, x.message, x.source, x.weight)
                     for x in v.preferences)
        if key == self._violations_key:
            return
        self._violations_key = key
        gui = self.server.gui
        rows = list(v.violations) + list(v.warnings) + list(v.preferences)
        shown = rows[:MAX_VIOLATION_ROWS]
        with self.f_viol:
            if self.md_viol_head is None:
                self.md_viol_head = gui.add_markdown("", order=0)
                self.md_viol = gui.add_markdown("", order=10_000)
            while len(self._viol_rows) < len(shown):
                k = len(self._viol_rows)
                b = gui.add_button("", hint="select these parts", order=1 + 2 * k)
                b.on_click(lambda _e, k=k: self._call(lambda: self._select(
                    list(self._viol_parts[k]))))
                md = gui.add_markdown("", order=2 + 2 * k)
                self._viol_rows.append((b, md))
            while len(self._viol_rows) > len(shown):
                b, md = self._viol_rows.pop()
                b.remove()
                md.remove()
        self._viol_parts = [x.parts for x in shown]
        for (b, md), x in zip(self._viol_rows, shown, strict=True):
            b.label = f"{_row_prefix(x)}{x.rule}({', '.join(x.parts)})"
            b.color = _ROW_COLOURS[x.severity]
            md.content = f"{_md_escape(x.message)}  \n`{x.source}`"
        self.md_viol_head.content = f"{len(rows)} in all:" if rows else ""
        self.md_viol_head.visible = bool(rows)
        text = "none"
        if len(rows) > MAX_VIOLATION_ROWS:
            more = rows[MAX_VIOLATION_ROWS:MAX_VIOLATION_ROWS + MAX_MD_ROWS]
            lines = [f"- {_md_escape(_row_prefix(x))}{_md_escape(x.rule)}"
                     f"({_md_escape(', '.join(x.parts))}): "
                     f"{_md_escape(x.message)} `{x.source}`" for x in more]
            left = len(rows) - MAX_VIOLATION_ROWS - len(more)
            text = (f"{len(rows) - MAX_VIOLATION_ROWS} more:\n\n" + "\n".join(lines)
                    + (f"\n\n… and {left} more" if left > 0 else ""))
        self.md_viol.content = text if (not rows or len(rows) > MAX_VIOLATION_ROWS) else ""
        self.md_viol.visible = not rows or len(rows) > MAX_VIOLATION_ROWS

    def _sync_fields(self) -> None:
        s = self.session
        self._syncing = True
        try:
            opts = self._part_options()
            if tuple(self.dd_part.options) != opts:
                self.dd_part.options = opts
            pid = self._current()
            self.dd_part.value = pid if pid is not None else PART_NONE
            if pid is not None:
                i = s.ids.index(pid)
                for k in range(3):
                    self.n_xyz[k].value = round(float(s.pos[i][k]), 6)
                self.n_yaw.value = round(float(s.yaw[i]), 6)
            for h in (*self.n_xyz, self.n_yaw):
                h.disabled = pid is None
        finally:
            self._syncing = False

    def _refresh_repair(self) -> None:
        r = self.session.last_repair
        if r is None:
            self.md_repair.content = ""
            return
        lines = [_md_escape(r.message)]
        for m in r.moves[:MAX_MD_ROWS]:
            src = ", ".join(f"{v:.4f}" for v in m.src)
            dst = ", ".join(f"{v:.4f}" for v in m.dst)
            lines.append(f"- {_md_escape(m.part)}: ({src}) → ({dst}), "
                         f"{m.distance * 1000:.1f} mm ({m.how})")
        if r.applied:
            lines.append("\nUndo puts the parts back.")
        self.md_repair.content = "\n".join(lines)


"""cellspec review: review, edit and accept a layout in the browser (viser)."""

from __future__ import annotations

import argparse
import json
import socket
import sys
from pathlib import Path

from cellspec.commands.common import EXIT_FAIL, EXIT_OK, add_shared
from cellspec.commands.sim import MAX_SECONDS
from cellspec.core.errors import CellspecError
from cellspec.core.extras import require_extra
from cellspec.core.limits import check_output


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``review`` verb."""
    c = sub.add_parser(
        "review", help="review and edit a layout in the browser",
        description="Start a local web page (viser) showing the cell in 3D with the layout's "
        "parts coloured by status and every violation in a side panel. Edits (move, add, "
        "delete, order) are re-verified at once by the same engine as `cellspec check`. "
        "Repair runs the CP-SAT repair (undoable). Accept writes the layout (only if it "
        "verifies) and exits 0; Reject exits 1 and writes nothing; Ctrl-C writes nothing "
        "and exits 1.")
    add_shared(c, cell=True, layout=True,
               output=("OUT.json", "where Accept writes the layout (default: LAYOUT itself)"))
    c.add_argument("--plan", metavar="PLAN.json", default=None,
                   help="a plan written by `cellspec sim -o PLAN.json`: replay its robot "
                   "motions on a timeline")
    c.add_argument("--trajectories", metavar="FILE.json", default=None,
                   help="with --plan: the execution record `cellspec sim --trajectories` "
                   "writes, to plot planned vs executed joints and δ against ε")
    c.add_argument("--port", type=int, default=8080,
                   help="port (default 8080; the next free one if taken; 0: any free port)")
    c.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only)")
    c.add_argument("--timeout", type=float, default=30.0, metavar="S",
                   help="verification time limit per edit in seconds (unknown when hit)")
    c.add_argument("--repair-time-limit", type=float, default=10.0, metavar="S",
                   help="time limit of the Repair button in seconds (default 10)")
    c.add_argument("--no-robots", action="store_true",
                   help="draw robot base markers only (skip loading the robot models)")
    c.set_defaults(func=run)


def check_bindable(host: str) -> None:
    """Bad input at once unless ``host`` resolves and this machine can bind it (the server
    library would otherwise retry silently, looking like a hang)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, ValueError) as exc:
        raise CellspecError(f"--host {host}: cannot resolve the address: "
                            f"{getattr(exc, 'strerror', None) or exc}") from None
    errors = []
    for family, kind, proto, _, addr in infos:
        try:
            with socket.socket(family, kind, proto) as s:
                s.bind((addr[0], 0, *addr[2:]))
            return
        except OSError as exc:
            errors.append(f"{addr[0]}: {exc.strerror or exc}")
    raise CellspecError(f"--host {host}: cannot bind the address ({'; '.join(errors)}); use "
                        "127.0.0.1 or an address of this machine")


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    require_extra("review", verb="review")
    if not a.no_robots:
        require_extra("twin", verb="review (its robots; --no-robots draws base markers only)")
    # lazy: CLI start-up time (every verb loads for --help; loads textX, pydantic, the review page)
    from cellspec.dsl.parser import load_cell
    from cellspec.layout import load_layout
    from cellspec.review.session import ReviewSession

    if not (0 <= a.port <= 65535):
        raise CellspecError(f"--port {a.port}: must be between 0 and 65535")

    if not (0 < a.timeout <= MAX_SECONDS) or not (0 < a.repair_time_limit <= MAX_SECONDS):
        raise CellspecError("--timeout and --repair-time-limit must be positive seconds, at "
                            f"most {MAX_SECONDS:g}")
    check_bindable(a.host)
    cell = load_cell(a.cell)
    layout = load_layout(a.layout)
    if not a.no_robots:  # an unknown model is a cell error (exit 2), not a silent marker
        # lazy: CLI start-up time (every verb loads for --help; loads the twin)
        from cellspec.robots.models import check_models

        check_models(cell)
    plan = None
    if a.plan is not None:
        # lazy: CLI start-up time (every verb loads for --help; loads the review page)
        from cellspec.review.replay import load_plan

        plan = load_plan(a.plan, cell, a.trajectories, layout=layout)
    elif a.trajectories is not None:
        raise CellspecError("--trajectories needs --plan PLAN.json")
    if plan is not None and a.no_robots:
        raise CellspecError("--plan replays the robots: it cannot be used with --no-robots")
    check_output(a.output, "-o")  # without -o, Accept writes the layout just read
    out = Path(a.output) if a.output else Path(a.layout)
    session = ReviewSession(cell, layout, timeout=a.timeout,
                            repair_time_limit=a.repair_time_limit)

    # lazy: CLI start-up time (every verb loads for --help; loads the review page)
    from cellspec.review.app import ReviewApp

    app = ReviewApp(session, out, host=a.host, port=a.port, plan=plan,
                    robots=not a.no_robots)
    try:
        try:
            url = app.start()
        except OSError as exc:
            raise CellspecError(f"cannot start the server on {a.host}:{a.port}: "
                                f"{exc.strerror or exc}") from None
        v = session.verdict
        # Ctrl-C from the moment the address is out is an interruption (exit 1, nothing
        # written): a signal taken while the print reacquires the GIL lands right after it
        try:
            if a.format == "json":
                print(json.dumps({"address": url, "verdict": v.verdict,
                                  "violations": len(v.violations)}), flush=True)
            else:
                print(f"review {layout.path} on {cell.name}: {url}", flush=True)
                print(f"{v.verdict}: {len(v.violations)} violation(s); Accept writes {out}, "
                      "Reject or Ctrl-C writes nothing", file=sys.stderr, flush=True)
            decision = app.wait_forever()
        except KeyboardInterrupt:
            decision = None
    finally:
        app.stop()
    v = session.verdict
    if a.format == "json":
        print(json.dumps({"decision": decision or "interrupted",
                          "output": str(session.written) if session.written else None,
                          "verdict": v.to_json()}), flush=True)
    elif decision == "accept":
        print(f"accepted: {len(session.ids)} parts, verified pass; written to {session.written}")
    elif decision == "reject":
        print("rejected: nothing written")
    else:
        print("interrupted: nothing written", file=sys.stderr)
    return EXIT_OK if decision == "accept" else EXIT_FAIL


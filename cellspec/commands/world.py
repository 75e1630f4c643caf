"""cellspec world: what a world database believes now, its history and its relation graph."""

from __future__ import annotations

import argparse
import json

from cellspec.commands.common import EXIT_FAIL, EXIT_INPUT, EXIT_OK, add_shared
from cellspec.core.errors import CellspecError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``world`` verb."""
    c = sub.add_parser("world", help="inspect a world database (show, history, relations)",
                       description="show: the entities (pose, confidence, lifecycle), the "
                       "interaction state and the current task; history: every transition "
                       "(committed, rolled back, with cause and recovery); relations: the "
                       "relation graph. The database is opened read-only in effect (nothing "
                       "is written). Exit 0, 2 bad input (missing, corrupt or foreign file).")
    add_shared(c)
    c.add_argument("what", choices=("show", "history", "relations", "trace"),
                   help="show the entities, the history, the relation graph, or validate "
                   "a reasoning trace")
    c.add_argument("db", help="the world database")
    c.add_argument("trace", nargs="?", default=None,
                   help="with `trace`: a reasoning trace JSON validated against the model "
                   "(syntax, semantics, physics); exit 0 accepted, 1 rejected by physics, "
                   "2 bad syntax or unknown entities")
    c.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    # lazy: CLI start-up time (every verb loads for --help; loads the world model)
    from cellspec.world.db import open_world

    if (a.what == "trace") != (a.trace is not None):
        raise CellspecError("`world trace DB TRACE.json` takes a trace file; the other "
                            "actions take none")
    with open_world(a.db) as w:
        if a.what == "trace":
            return _trace(a, w)
        if a.what == "show":
            snap = w.snapshot()
            if a.format == "json":
                print(json.dumps(snap, indent=2))
                return EXIT_OK
            cs = snap["cs"]
            print(f"world of cell {snap['cell'] or '?'}: {len(snap['entities'])} entities, "
                  f"CS ⟨{cs['phase']}, {cs['object'] or '-'}⟩, current task "
                  f"{snap['current_task'] or 'none (all done)'}, "
                  f"{snap['transitions']} history entries")
            for e in snap["entities"]:
                p = ", ".join(f"{v:.4f}" for v in e["pos"])
                print(f"  {e['id']:<8} {e['type']:<9} ({p})  conf {e['confidence']:.3f}  "
                      f"{e['lifecycle']}")
        elif a.what == "history":
            hist = w.history()
            if a.format == "json":
                print(json.dumps(hist, indent=2))
                return EXIT_OK
            for h in hist:
                extra = ""
                if h["cause"] or h["recovery"]:
                    extra = f"  {h['cause'] or '?'} -> {h['recovery'] or '?'}"
                failed = h["detail"].get("failed") if isinstance(h["detail"], dict) else None
                if h["outcome"] == "rolled_back" and failed:
                    extra += f"  (failed: {'; '.join(failed)})"
                print(f"{h['seq']:5d}  {h['action']:<8} {h['part']:<6} {h['outcome']}{extra}")
        else:
            rels = w.relations()
            if a.format == "json":
                print(json.dumps([{"rel": r.rel, "a": r.a, "b": r.b} for r in rels], indent=2))
                return EXIT_OK
            for r in rels:
                print(str(r))
    return EXIT_OK


def _trace(a: argparse.Namespace, w: object) -> int:
    # lazy: CLI start-up time (every verb loads for --help; loads the world model)
    from cellspec.world.trace import load_trace, validate_trace

    v = validate_trace(load_trace(a.trace), w)  # type: ignore[arg-type]
    if a.format == "json":
        print(json.dumps(v.to_json(), indent=2))
    elif v.accepted:
        print("trace accepted: syntax, semantics and physics hold")
    else:
        print(f"trace rejected at the {v.stage} stage:")
        for r in v.reasons:
            print(f"  {r}")
    if v.accepted:
        return EXIT_OK
    return EXIT_FAIL if v.stage == "physics" else EXIT_INPUT

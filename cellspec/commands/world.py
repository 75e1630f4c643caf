"""cellspec world: what a world database believes now, its history and its relation graph."""

from __future__ import annotations

import argparse
import json

from cellspec.commands.common import EXIT_FAIL, EXIT_INPUT, EXIT_OK, add_shared
from cellspec.core.errors import CellspecError

# `world context`'s zones and defaults, written here for --help (importing
# cellspec.world.context would load the world model at CLI start-up); a test keeps them
# equal to the module's
ZONES = ("action", "part", "target", "none")
DEFAULT_ZONE, DEFAULT_HOPS, MAX_HOPS = "action", 1, 50


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``world`` verb."""
    c = sub.add_parser("world", help="inspect a world database (show, history, relations, "
                       "trace, context)",
                       description="show: the entities (pose, confidence, lifecycle), the "
                       "interaction state and the current task; history: every transition "
                       "(committed, rolled back, with cause and recovery); relations: the "
                       "relation graph; context: the task-relevant subgraph of one action "
                       "(its objects, what supports or touches them, what lies in its zone, "
                       "every support relation), one line per entity and relation, for a "
                       "prompt. The database is opened read-only in effect (nothing is "
                       "written). Exit 0, 2 bad input (missing, corrupt or foreign file, no "
                       "such action, bad --hops).")
    add_shared(c)
    c.add_argument("what", choices=("show", "history", "relations", "trace", "context"),
                   help="show the entities, the history, the relation graph, validate "
                   "a reasoning trace, or extract an action's context")
    c.add_argument("db", help="the world database")
    c.add_argument("trace", nargs="?", default=None,
                   help="with `trace`: a reasoning trace JSON validated against the model "
                   "(syntax, semantics, physics); exit 0 accepted, 1 rejected by physics, "
                   "2 bad syntax or unknown entities")
    c.add_argument("--action", metavar="ID", help="context: the task node (pick:c1, "
                   "place:c1; default the current task)")
    c.add_argument("--zone", choices=ZONES, default=DEFAULT_ZONE,
                   help=f"context: the zone kept whole (default {DEFAULT_ZONE}: around the "
                   "part and its place target; part, target, none)")
    c.add_argument("--hops", type=int, default=DEFAULT_HOPS, metavar="N",
                   help=f"context: relations walked from the action's part (default "
                   f"{DEFAULT_HOPS}; 0 to {MAX_HOPS})")
    c.add_argument("--no-supports", action="store_true",
                   help="context: leave out the support relations outside the subgraph")
    c.add_argument("--max-tokens", type=int, metavar="N",
                   help="context: drop the least relevant lines to fit N tokens (chars/4)")
    c.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    # lazy: CLI start-up time (every verb loads for --help; loads the world model)
    from cellspec.world.context import shape_note
    from cellspec.world.db import open_world

    if (a.what == "trace") != (a.trace is not None):
        raise CellspecError("`world trace DB TRACE.json` takes a trace file; the other "
                            "actions take none")
    if a.what != "context":
        given = [f"--{n.replace('_', '-')}" for n in ("action", "max_tokens")
                 if getattr(a, n) is not None] + (["--no-supports"] if a.no_supports else [])
        if given:
            raise CellspecError(f"{', '.join(given)}: only `world context` takes them")
    with open_world(a.db) as w:
        if a.what == "trace":
            return _trace(a, w)
        if a.what == "context":
            return _context(a, w)
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
                print(f"  {e['id']:<8} {e['type']:<9} ({p}){shape_note(e)}  conf "
                      f"{e['confidence']:.3f}  {e['lifecycle']}")
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


def _context(a: argparse.Namespace, w: object) -> int:
    """Print the action's task-relevant subgraph (text: the prompt lines)."""
    # lazy: CLI start-up time (every verb loads for --help)
    from cellspec.world.context import count_tokens, extract, find_action, whole

    act = find_action(w, a.action)  # type: ignore[arg-type]
    ctx = extract(w, act, zone=a.zone, hops=a.hops,  # type: ignore[arg-type]
                  supports=not a.no_supports, max_tokens=a.max_tokens)
    if a.format == "json":
        obj = ctx.to_json()
        obj["whole_graph_tokens"] = count_tokens(whole(w, act).text())  # type: ignore[arg-type]
        print(json.dumps(obj, indent=2, sort_keys=True))
    else:
        print(ctx.text(), end="")
    return EXIT_OK

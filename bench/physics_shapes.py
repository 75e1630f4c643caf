"""Physics agreement for yawed boxes and cylinders (issue 22): does `check` pass only shape
structures that stand?

The shape families of ``tests/structure_families.py`` (``rotated_roof``, ``yawed_stack``,
``cylinders_on_blocks``), seeded, each with a bottom-up order, are checked and labelled by
the physics oracle ``cellspec.robots.settle`` with the noise tests of
``bench/physics_agreement.py`` (``cellspec.robots.agreement``); the confusion matrix per
family (target: 0 false passes), and seconds per structure for check and for settle.
``check`` decides these layouts with every rule of the station (the exact shapes kernel,
the stability LP on contact polygons); an ``unknown`` is counted as such, never as a pass.

Settle must handle shapes: if it refuses them, the script says so and exits 2.
``--timing`` needs no pybullet: it times the stability analysis (finished layout and every
stage) per structure on the shape families and on as many box structures of
``bench/physics_agreement.py``'s families, same process.

    python bench/physics_shapes.py [--n 300] [--seed 0] [--families a,b] [--timing]

ONE JSON line on stdout, the table on stderr (the convention of bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # structure families

import numpy as np  # noqa: E402
from structure_families import (  # noqa: E402
    FAMILIES,
    SHAPE_FAMILIES,
    load_cell_variant,
    structures,
)

from cellspec.core.errors import CellspecError  # noqa: E402
from cellspec.solver import stability as stab  # noqa: E402
from cellspec.solver.instance import build_instance  # noqa: E402
from cellspec.solver.verify import check  # noqa: E402


def stability_verdict(cell, layout) -> str:  # noqa: ANN001
    """pass | fail from the stability analysis alone (the finished layout, every stage)."""
    rep = stab.report(build_instance(cell, layout))
    ok = bool(rep.stable.all()) and (rep.placed_stable is None or bool(rep.placed_stable.all()))
    return "pass" if ok else "fail"


def timing(cell, n: int, seed: int) -> dict:  # noqa: ANN001
    """ms per structure of the stability analysis: shape families vs box families."""
    out = {}
    for name, fams in (("shapes", list(SHAPE_FAMILIES)), ("boxes", list(FAMILIES))):
        S = structures(n, seed, fams)
        stability_verdict(cell, S[0].layout)  # imports (shapely, the LP helper) outside
        t = time.perf_counter()
        for s in S:
            stability_verdict(cell, s.layout)
        out[name] = {"structures": n, "ms_per_structure": 1000 * (time.perf_counter() - t) / n}
    out["ratio"] = out["shapes"]["ms_per_structure"] / out["boxes"]["ms_per_structure"]
    return out


def settle_handles_shapes(cell) -> str | None:  # noqa: ANN001
    """None when settle runs a yawed part and a cylinder; else why not."""
    try:
        from cellspec.robots import settle as st
    except Exception as exc:  # noqa: BLE001 (pybullet missing or broken)
        return f"cellspec.robots.settle does not import ({exc})"
    probe = structures(1, 0, ["cylinders_on_blocks"])[0].layout
    try:
        st.settle(cell, probe)
    except CellspecError as exc:
        return str(exc).splitlines()[0]
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300, help="structures (default 300)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--families", default="", help="comma-separated (default: "
                    + ", ".join(SHAPE_FAMILIES) + ")")
    ap.add_argument("--timing", action="store_true", help="only time the stability analysis "
                    "(no pybullet needed)")
    args = ap.parse_args(argv)
    cell = load_cell_variant(shapes=True)
    if args.timing:
        out = {"timing": timing(cell, args.n, args.seed)}
        t = out["timing"]
        print(f"stability, finished and every stage: {t['shapes']['ms_per_structure']:.2f} ms "
              f"per shape structure, {t['boxes']['ms_per_structure']:.2f} ms per box structure "
              f"({t['ratio']:.2f}x), {args.n} each", file=sys.stderr)
        print(json.dumps(out))
        return 0
    try:
        from cellspec.robots import quiet_pybullet

        quiet_pybullet()  # before pybullet's banner reaches stdout
    except Exception:  # noqa: BLE001, S110 (settle_handles_shapes names the problem)
        pass
    why = settle_handles_shapes(cell)
    if why is not None:
        print(f"physics_shapes: needs settle with yawed boxes and cylinders (branch twin, issue "
              f"22 item 5); settle says: {why}", file=sys.stderr)
        return 2
    from cellspec.robots import agreement as ag

    fams = [f for f in args.families.split(",") if f] or list(SHAPE_FAMILIES)
    noise = ag.measure_noise(cell)
    S = structures(args.n, args.seed, fams)
    rows, per = [], []
    t_settle = t_check = 0.0
    for s in S:
        t0 = time.perf_counter()
        lab = ag.label(cell, s.layout, noise, seed=args.seed, index=s.index)
        t_settle += time.perf_counter() - t0
        if lab.drop is not None:
            per.append({"index": s.index, "family": s.family, "dropped": lab.drop})
            continue
        t0 = time.perf_counter()
        verdict = check(cell, s.layout).verdict
        t_check += time.perf_counter() - t0
        rows.append((s.family, lab.fall, verdict))
        per.append({"index": s.index, "family": s.family, "note": s.note,
                    "settle": "fall" if lab.fall else "stand", "verdict": verdict})
    conf = ag.confusion(rows)
    out = {"n": args.n, "seed": args.seed, "families": fams, "confusion": conf,
           "dropped": sum(1 for p in per if "dropped" in p),
           "check_ms_per_structure": round(1000 * t_check / max(1, len(rows)), 2),
           "settle_ms_per_structure": round(1000 * t_settle / max(1, len(S)), 2),
           "structures": per}
    print(f"{'family':22s} {'n':>4s} {'T-pass':>6s} {'T-fail':>6s} {'F-PASS':>6s} "
          f"{'F-fail':>6s} {'unk':>4s}", file=sys.stderr)
    for fam, c in sorted(conf.items(), key=lambda kv: (kv[0] == "all", kv[0])):
        print(f"{fam:22s} {sum(c.values()):4d} {c['true_pass']:6d} {c['true_fail']:6d} "
              f"{c['false_pass']:6d} {c['false_fail']:6d} {c['unknown']:4d}", file=sys.stderr)
    print(f"check {out['check_ms_per_structure']} ms, settle {out['settle_ms_per_structure']} "
          "ms per structure", file=sys.stderr)
    print(json.dumps(out))
    return 1 if conf.get("all", {}).get("false_pass", 0) else 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())

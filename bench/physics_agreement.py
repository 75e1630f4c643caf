"""Physics agreement: does `check` pass only structures that stand? (issue 14)

Seeded random structures of eight families (``tests/structure_families.py``), each with a
buildable bottom-up order, are checked by ``cellspec.solver.verify.check`` and labelled by
the physics oracle ``cellspec.robots.settle`` (pybullet, every stage of construction).
Per family and per checked cell: the confusion matrix against settle:

* false pass  = check passes, settle says something falls (the target: 0),
* false fail  = check fails, everything stands (target: <= 5 %),
* true pass / true fail,

and seconds per structure for check and for settle. Checked cells (peers in one run):
``station`` (the dual-arm station as shipped, ``import physical``: the default semantics)
and ``stability`` (the same plus ``import stability``: the opt-in rule of round 1, which
since issue 14 only re-imports ``physical``, so it now equals ``station``; ``--no-stability``
skips it; skipped with a note if that cell does not load).
``--margins 0,0.001,0.002`` adds one ``station`` cell per margin (``stability margin M``;
skipped with the parser's message where the cell language lacks the item) and reports false
passes/fails per margin; ``--margin M`` checks the station with that one margin.

**Noise.** The oracle's own noise is measured in the same run on structures that
obviously stand (aligned towers of 1-6 cubes, an aligned 4x2 wall, a beam centred on two
pillars, a plate on four aligned pillars): largest displacement and rotation. A structure
is dropped (reported, not counted) when settle's answer is within that noise of the fall
threshold: some part's displacement or rotation lies within 2x the measured noise either
side of 5 mm / 5 deg, and no part is clearly past that band; or settle's verdict changes
when every part is moved by a seeded +-0.2 mm in x and y, those offsets or their opposites
(run for every structure whose largest displacement is at most 5 cm: the others are far
from the threshold; at settle's 960 Hz a load exactly over an edge may stand still, so
structures that barely move are tried too).

**Cylinder stacks** (issue 28): ``--families can_stack,rim_stack`` (or ``cylinders``)
draws the families of ``tests/cylinder_stacks.py`` (stacks near the rims of cans);
shape families check and settle on ``cell_text(shapes=True)``, and the noise then also
settles towers of aligned cans. ``--cylinder-margin M`` sets settle's collision margin of
every part of a layout with a cylinder (``cellspec.robots.settle.CYLINDER_MARGIN``, m;
``bullet``: pybullet's own 1 mm, the default) to compare oracles.

``--sim N`` also executes a seeded sample of N structures in the twin (``cellspec sim
--unverified``: robots pick from the feeders; a part ending more than 1 cm from its place
counts as a fall) and reports its agreement with settle; opt-in because one sim takes
seconds (measured: see the README table).

    python bench/physics_agreement.py [--n 1000] [--seed 0] [--families a,b] [--margin M]
        [--margins M1,M2,...] [--sim N] [--json FILE] [--no-perturb] [--lp-solvers]
        [--cylinder-margin M|bullet]

ONE JSON line on stdout, the table on stderr (the convention of bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # structure families

import numpy as np  # noqa: E402
from cylinder_stacks import CYLINDER_FAMILIES  # noqa: E402
from structure_families import (  # noqa: E402
    FAMILIES,
    SHAPE_FAMILIES,
    StructureCase,
    load_cell_variant,
    structures,
)

from cellspec.core.errors import CellspecError  # noqa: E402
from cellspec.robots import agreement as ag  # noqa: E402
from cellspec.robots import quiet_pybullet  # noqa: E402
from cellspec.robots import settle as st  # noqa: E402
from cellspec.solver import stability as stab  # noqa: E402
from cellspec.solver import stability_lp as stab_lp  # noqa: E402
from cellspec.solver.instance import build_instance  # noqa: E402
from cellspec.solver.verify import check  # noqa: E402

PUBLISHED_CRA = {"per_structure_s": 0.04, "staged_s": 0.12}  # compas_cra + IPOPT (issue 14)


def sim_label(cell, s: StructureCase) -> tuple[str, float, str]:
    """The twin's answer: stand | fall | n/a (it could not execute), seconds, reason."""
    from cellspec.robots.sim import simulate

    t0 = time.perf_counter()
    try:
        res = simulate(cell, s.layout, unverified=True, time_limit=10.0,
                       motion_time_limit=2.0)
    except CellspecError as exc:
        return "n/a", time.perf_counter() - t0, str(exc).splitlines()[0]
    dt = time.perf_counter() - t0
    ex = res.execution
    if ex is None:
        return "n/a", dt, res.reason or "not executed"
    if ex.misplaced:
        return "fall", dt, "; ".join(f"{k} {v:.3f} m off" for k, v in sorted(ex.misplaced.items()))
    return "stand", dt, ""


def cells(args) -> list[tuple[str, object, str | None]]:
    """The checked cells (name, Cell or None, note when skipped)."""
    out: list[tuple[str, object, str | None]] = []

    def add(name: str, **kw) -> None:
        try:
            out.append((name, load_cell_variant(shapes=args.shapes, **kw), None))
        except CellspecError as exc:
            out.append((name, None, f"skipped: the cell does not load ({exc.diagnostics[0]})"))

    add("station", margin=args.margin)
    if not args.no_stability:
        add("stability", margin=args.margin, import_stability=True)
    for m in args.margins:
        add(f"margin={m:g}", margin=m)
    return out


def _stability_seconds(cell, layout) -> tuple[float, int]:
    """Seconds of the stability analysis alone (finished layout and every stage) on a
    fresh instance, what compares with the published RBE solve times, and its LPs."""
    inst = build_instance(cell, layout)
    n0 = stab_lp.SOLVES[0]
    t = time.perf_counter()
    try:
        stab.report(inst)
    except stab.StabilityLimit:
        pass
    return time.perf_counter() - t, stab_lp.SOLVES[0] - n0


def _lp_solvers(cell, structs: list[StructureCase]) -> dict:
    """The stability analysis of every structure with each LP backend: ms per structure,
    and whether the verdicts agree."""
    out: dict = {}
    verdicts: dict[str, list[bool]] = {}
    saved = stab_lp.SOLVER
    try:
        for name in ("glop", "highs"):
            stab_lp.SOLVER = name
            t = time.perf_counter()
            vs = []
            for s in structs:
                rep = stab.report(build_instance(cell, s.layout))
                vs.append(bool(rep.stable.all()) and (rep.placed_stable is None
                                                     or bool(rep.placed_stable.all())))
            out[name] = {"ms_per_structure": 1000 * (time.perf_counter() - t) / len(structs)}
            verdicts[name] = vs
    finally:
        stab_lp.SOLVER = saved
    out["agree"] = verdicts["glop"] == verdicts["highs"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="structures (default 1000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--families", default="", help="comma-separated (default all: "
                    + ", ".join(FAMILIES) + ")")
    ap.add_argument("--margin", type=float, default=None, help="stability margin M (m) of "
                    "the station and stability cells")
    ap.add_argument("--margins", default="", help="comma-separated margins (m): false "
                    "passes/fails per margin")
    ap.add_argument("--sim", type=int, default=0, metavar="N", help="also run N structures "
                    "(seeded sample) through the twin's sim (slow: seconds each)")
    ap.add_argument("--json", metavar="FILE", help="also write the full result (per "
                    "structure) here")
    ap.add_argument("--no-perturb", action="store_true", help="skip the perturbation test")
    ap.add_argument("--no-stability", action="store_true", help="do not check the "
                    "`import stability` cell")
    ap.add_argument("--lp-solvers", action="store_true", help="also time the stability "
                    "analysis with GLOP and with HiGHS (OR-Tools model builder)")
    ap.add_argument("--cylinder-margin", default=None, help="settle's collision margin of "
                    "every part of a layout with a cylinder (m), or 'bullet' for "
                    "pybullet's own (settle's default)")
    args = ap.parse_args(argv)
    args.margins = [float(v) for v in args.margins.split(",") if v.strip()]
    fams = [f for f in args.families.split(",") if f] or list(FAMILIES)
    fams = [g for f in fams for g in (list(CYLINDER_FAMILIES) if f == "cylinders" else [f])]
    args.shapes = any(f in SHAPE_FAMILIES or f in CYLINDER_FAMILIES for f in fams)
    if args.cylinder_margin is not None:
        st.CYLINDER_MARGIN = (None if args.cylinder_margin == "bullet"
                              else float(args.cylinder_margin))
    quiet_pybullet()

    base = load_cell_variant(shapes=args.shapes)  # settle's cell: sizes, masses, friction
    t0 = time.perf_counter()
    noise = ag.measure_noise(base, cylinders=args.shapes)
    S = structures(args.n, args.seed, fams)
    labels = [ag.label(base, s.layout, noise, seed=args.seed, index=s.index,
                       perturb=not args.no_perturb) for s in S]
    kept = [k for k, lab in enumerate(labels) if lab.drop is None]
    checked = cells(args)
    results: dict[str, dict] = {}
    per_structure: list[dict] = [
        {"index": s.index, "family": s.family, "note": s.note,
         "settle": "fall" if lab.fall else "stand", "settle_message": lab.message,
         "dropped": lab.drop, "check": {}} for s, lab in zip(S, labels, strict=True)]
    for name, cell, note in checked:
        if cell is None:
            results[name] = {"skipped": note}
            continue
        rows, secs, cpus, stab_s, lps = [], [], [], [], []
        for k in kept:
            t, c = time.perf_counter(), time.process_time()
            v = check(cell, S[k].layout)
            secs.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
            ss, nl = _stability_seconds(cell, S[k].layout)
            stab_s.append(ss)
            lps.append(nl)
            rows.append((S[k].family, labels[k].fall, v.verdict))
            per_structure[k]["check"][name] = {
                "verdict": v.verdict, "rules": sorted({x.rule for x in v.violations})}
        conf = ag.confusion(rows)
        results[name] = {"confusion": conf, "check_s_mean": float(np.mean(secs)),
                         "check_s_p95": float(np.percentile(secs, 95)),
                         "check_cpu_s_mean": float(np.mean(cpus)),
                         "stability_s_mean": float(np.mean(stab_s)),
                         "stability_s_p95": float(np.percentile(stab_s, 95)),
                         "lps_per_structure": float(np.mean(lps))}

    lp_solvers = _lp_solvers(checked[0][1], [S[k] for k in kept]) if args.lp_solvers else None
    per_margin = []
    for m in args.margins:
        res = results[f"margin={m:g}"]
        if "skipped" in res:
            per_margin.append({"margin": m, "skipped": res["skipped"]})
        else:
            c = res["confusion"]["all"]
            per_margin.append({"margin": m, "false_pass": c["false_pass"],
                               "false_fail": c["false_fail"], "unknown": c["unknown"]})
    sim = None
    if args.sim > 0:
        rng = np.random.default_rng([args.seed, 7])
        pick = sorted(rng.choice(kept, size=min(args.sim, len(kept)), replace=False).tolist())
        agree = Counter()
        secs = []
        for k in pick:
            outcome, dt, why = sim_label(base, S[k])
            secs.append(dt)
            settle_says = "fall" if labels[k].fall else "stand"
            agree["n/a" if outcome == "n/a" else
                  ("agree" if outcome == settle_says else f"sim_{outcome}_settle_{settle_says}")
                  ] += 1
            per_structure[k]["sim"] = {"outcome": outcome, "reason": why}
        sim = {"n": len(pick), "counts": dict(sorted(agree.items())),
               "seconds_mean": float(np.mean(secs)) if secs else None}

    settle_s = [lab.seconds for lab in labels]
    dropped = Counter(lab.drop for lab in labels if lab.drop)
    falls = sum(labels[k].fall for k in kept)
    out = {"bench": "physics_agreement", "n": len(S), "seed": args.seed, "families": fams,
           "kept": len(kept), "dropped": dict(dropped), "falls": falls,
           "perturbed": sum(lab.perturbed for lab in labels),
           "oracle": {"hz": st.HZ, "threshold_m": st.FALL_DISPLACEMENT,
                      "cylinder_margin_m": st.CYLINDER_MARGIN,
                      "threshold_deg": st.FALL_ROTATION_DEG,
                      "noise_displacement_m": noise.displacement,
                      "noise_rotation_deg": noise.rotation_deg,
                      "spawn_steps": st.SPAWN_STEPS, "final_steps": st.FINAL_STEPS,
                      "drop_band_m": noise.band[0], "drop_band_deg": noise.band[1],
                      "settle_s_mean": float(np.mean(settle_s)),
                      "settle_cpu_s_mean": float(np.mean([lab.cpu_seconds for lab in labels])),
                      "settle_s_p95": float(np.percentile(settle_s, 95))},
           "checks": results, "per_margin": per_margin, "sim": sim, "lp_solvers": lp_solvers,
           "peer_published": PUBLISHED_CRA,
           "seconds": round(time.perf_counter() - t0, 1)}
    if args.json:
        Path(args.json).write_text(json.dumps({**out, "noise": list(noise.standers),
                                               "structures": per_structure}, indent=1) + "\n")
    print(json.dumps(out))
    _table(out, list(noise.standers))
    return 0


def _table(out: dict, noise: list[dict]) -> None:
    e = sys.stderr
    o = out["oracle"]
    print(f"physics agreement: {out['n']} structures (seed {out['seed']}), {out['kept']} kept, "
          f"{out['falls']} of them fall in settle; dropped {out['dropped'] or 'none'}", file=e)
    print(f"oracle noise on obvious standers: {o['noise_displacement_m'] * 1000:.2f} mm, "
          f"{o['noise_rotation_deg']:.2f} deg (threshold {o['threshold_m'] * 1000:g} mm / "
          f"{o['threshold_deg']:g} deg); not standing: "
          f"{[x['name'] for x in noise if x['verdict'] != 'stand'] or 'none'}", file=e)
    print(f"settle at {o['hz']} Hz (cylinder collision margin "
          f"{o['cylinder_margin_m'] if o['cylinder_margin_m'] is not None else 'pybullet'}): "
          f"{o['settle_s_mean']:.3f} s per structure (p95 "
          f"{o['settle_s_p95']:.3f}; CPU "
          f"{o['settle_cpu_s_mean']:.3f} s); drop band +-{o['drop_band_m'] * 1000:.2f} mm / "
          f"+-{o['drop_band_deg']:.2f} deg around the threshold", file=e)
    for name, res in out["checks"].items():
        if "skipped" in res:
            print(f"\n[{name}] {res['skipped']}", file=e)
            continue
        print(f"\n[{name}] check {res['check_s_mean'] * 1000:.1f} ms per structure (p95 "
              f"{res['check_s_p95'] * 1000:.1f} ms, CPU {res['check_cpu_s_mean'] * 1000:.1f} ms); "
              f"stability alone, every stage: {res['stability_s_mean'] * 1000:.2f} ms (p95 "
              f"{res['stability_s_p95'] * 1000:.2f} ms, {res['lps_per_structure']:.2f} LPs; "
              f"published compas_cra RBE: "
              f"{PUBLISHED_CRA['per_structure_s'] * 1000:.0f} ms, staged "
              f"{PUBLISHED_CRA['staged_s'] * 1000:.0f} ms: "
              f"{PUBLISHED_CRA['staged_s'] / max(res['stability_s_mean'], 1e-9):.0f}x)", file=e)
        print(f"{'family':<14}{'n':>5}{'T-pass':>8}{'T-fail':>8}{'F-PASS':>8}{'F-fail':>8}"
              f"{'unk':>5}{'FF %':>7}", file=e)
        for fam, c in sorted(res["confusion"].items(), key=lambda kv: kv[0] == "all"):
            n = sum(c.values())
            stands = c["true_pass"] + c["false_fail"]
            ff = 100.0 * c["false_fail"] / stands if stands else 0.0
            print(f"{fam:<14}{n:>5}{c['true_pass']:>8}{c['true_fail']:>8}{c['false_pass']:>8}"
                  f"{c['false_fail']:>8}{c['unknown']:>5}{ff:>7.1f}", file=e)
    if out["per_margin"]:
        print("\nmargin   false passes   false fails", file=e)
        for r in out["per_margin"]:
            if "skipped" in r:
                print(f"{r['margin']:<9g}{r['skipped']}", file=e)
            else:
                print(f"{r['margin']:<9g}{r['false_pass']:>12}{r['false_fail']:>14}", file=e)
    if out.get("lp_solvers"):
        lps = out["lp_solvers"]
        print(f"\nLP backend (stability alone, every stage): GLOP "
              f"{lps['glop']['ms_per_structure']:.2f} ms, HiGHS "
              f"{lps['highs']['ms_per_structure']:.2f} ms per structure; verdicts agree: "
              f"{lps['agree']}", file=e)
    if out["sim"]:
        s = out["sim"]
        print(f"\nsim sample of {s['n']}: {s['counts']} ({s['seconds_mean']:.1f} s each)",
              file=e)


if __name__ == "__main__":
    sys.exit(main())

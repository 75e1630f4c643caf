"""Pictures: the dual-arm schedule as a Gantt chart (``sim --gantt``) and benchmark tables
as charts (``bench/*.py --plot DIR``). matplotlib with the Agg backend (no display);
imported only by the verbs and benches that draw, so the rest never needs matplotlib.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cellspec.core.errors import CellspecError
from cellspec.robots.allocation import in_zone

if TYPE_CHECKING:
    from cellspec.dsl.model import Cell
    from cellspec.robots.reports import SimResult

DPI = 100
SIZE_IN = (10.0, 4.0)  # 1000 x 400 pixels


def _plt():
    try:
        # lazy: the plot extra (matplotlib); drawing is optional
        import matplotlib
    except ImportError as exc:  # an optional dependency: say what to install
        raise CellspecError(f"drawing needs matplotlib: pip install matplotlib ({exc})") \
            from None
    matplotlib.use("Agg", force=True)
    # lazy: the plot extra (matplotlib); drawing is optional
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "cellspec"  # deterministic output
    return plt


def gantt_rows(cell: Cell, res: SimResult) -> list[dict]:
    """The bars of the schedule: per action its robot, part, start and end (s), and whether
    it enters the shared zone; the executed timeline when there is one, else CP-SAT's
    schedule. Idle gaps between a robot's actions are ``wait`` rows."""
    compiled = {a.index: a for a in getattr(res, "compiled", [])}
    by_part = {a.part: a for a in compiled.values()}
    rows: list[dict] = []
    tl = getattr(res, "timeline", None)
    if tl is not None and tl.windows:
        source = "executed"
        for idx, t0, t1, robot in sorted(tl.windows, key=lambda w: (w[3], w[1])):
            a = compiled.get(idx)
            shared = a is not None and (in_zone(cell, a.pick) or in_zone(cell, a.place))
            rows.append({"robot": robot, "part": a.part if a else str(idx), "kind": "action",
                         "start": round(t0, 3), "end": round(t1, 3), "shared": shared})
    elif res.schedule is not None and res.schedule.slots:
        source = "scheduled"
        for s in sorted(res.schedule.slots, key=lambda s: (s.arm, s.start)):
            a = by_part.get(s.part)
            rows.append({"robot": s.arm, "part": s.part, "kind": "pick", "start":
                         round(s.start, 3), "end": round(s.place_start, 3),
                         "shared": bool(a is not None and in_zone(cell, a.pick))})
            rows.append({"robot": s.arm, "part": s.part, "kind": "place", "start":
                         round(s.place_start, 3), "end": round(s.end, 3),
                         "shared": bool(a is None or in_zone(cell, a.place))})
    else:
        return []
    waits = []
    for robot in sorted({r["robot"] for r in rows}):
        mine = sorted((r for r in rows if r["robot"] == robot), key=lambda r: r["start"])
        for a, b in zip(mine, mine[1:], strict=False):
            if b["start"] - a["end"] > 0.05:
                waits.append({"robot": robot, "part": "", "kind": "wait", "start": a["end"],
                              "end": b["start"], "shared": False})
    for r in rows:
        r["source"] = source
    for w in waits:
        w["source"] = source
    return sorted(rows + waits, key=lambda r: (r["robot"], r["start"], r["kind"]))


def draw_gantt(rows: list[dict], path: str | Path, title: str,
               robots: list[str] | None = None) -> None:
    """Draw the rows of :func:`gantt_rows` as one lane per robot (``robots``: every lane to
    show, idle ones included) and write a PNG."""
    plt = _plt()
    robots = sorted(set(robots or ()) | {r["robot"] for r in rows})
    fig, ax = plt.subplots(figsize=SIZE_IN, dpi=DPI)
    colours = {"action": "#4878cf", "pick": "#6acc65", "place": "#4878cf"}
    for lane, robot in enumerate(robots):
        for r in (x for x in rows if x["robot"] == robot):
            width = max(r["end"] - r["start"], 1e-3)
            if r["kind"] == "wait":
                ax.barh(lane, width, left=r["start"], height=0.5, color="white",
                        edgecolor="#999999", hatch="//")
                continue
            ax.barh(lane, width, left=r["start"], height=0.6, color=colours[r["kind"]],
                    edgecolor="#d65f5f" if r["shared"] else "black",
                    linewidth=2.5 if r["shared"] else 0.5)
            if r["part"] and (r["kind"] != "pick"):
                ax.text(r["start"] + width / 2, lane, r["part"], ha="center", va="center",
                        fontsize=8, color="white")
    ax.set_yticks(range(len(robots)), robots)
    ax.set_ylim(-0.7, len(robots) - 0.3)
    ax.set_xlim(0, max([r["end"] for r in rows] + [1.0]) * 1.02)
    ax.set_xlabel("time (s)")
    ax.set_title(title)
    # lazy: the plot extra (matplotlib); drawing is optional
    from matplotlib.patches import Patch

    legend = [Patch(facecolor="#4878cf", label="action" if rows and rows[0]["source"] ==
                    "executed" else "place"),
              Patch(facecolor="white", edgecolor="#d65f5f", linewidth=2.5,
                    label="enters the shared zone"),
              Patch(facecolor="white", edgecolor="#999999", hatch="//", label="wait")]
    if any(r["kind"] == "pick" for r in rows):
        legend.insert(0, Patch(facecolor="#6acc65", label="pick"))
    ax.legend(handles=legend, loc="upper right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(str(path), dpi=DPI, metadata={"Software": None})
    plt.close(fig)


def draw_table(rows: list[dict], x: str, ys: list[str], path: str | Path, title: str,
               kind: str = "line", ylabel: str = "", logy: bool = False,
               logx: bool = False) -> None:
    """A benchmark table as a chart: ``ys`` columns against ``x`` (lines or grouped bars)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=SIZE_IN, dpi=DPI)
    xs = [r[x] for r in rows]
    if kind == "bar":
        n = max(len(ys), 1)
        width = 0.8 / n
        for k, y in enumerate(ys):
            ax.bar([i + k * width for i in range(len(xs))],
                   [float(r.get(y) or 0) for r in rows], width=width, label=y)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(xs))], [str(v) for v in xs],
                      rotation=20, fontsize=8)
    else:
        for y in ys:
            pts = [(r[x], r[y]) for r in rows if r.get(y) is not None]
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=y)
        ax.set_xlabel(x)
    if logy:
        ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # never over the data
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(str(path), dpi=DPI, metadata={"Software": None})
    plt.close(fig)

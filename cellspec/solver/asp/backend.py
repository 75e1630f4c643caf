"""The clingo backend: ground the compiled rules over the instance's facts and read
back ``violation/2``. The only module that imports clingo (lazily)."""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources

import numpy as np
import numpy.typing as npt

from cellspec.core import geometry as g
from cellspec.core import relations
from cellspec.core.status import BackendStatus, InternalError, Reason
from cellspec.solver.asp.clingo_log import clingo_logger
from cellspec.solver.asp.compile import FAMILY_PART, CompiledProgram
from cellspec.solver.asp.decide import Kernel, pushed_facts
from cellspec.solver.asp.decide import pairs_both as _pairs_both
from cellspec.solver.asp.decide import rows_text as _rows
from cellspec.solver.instance import BoxU, Instance
from cellspec.solver.reference import STABILITY

GROUND_LIMIT = 20_000_000  # bindings; beyond this a rule would not finish in time


@dataclass
class BackendResult:
    """What one clingo run decided: ``done`` with the violations, or ``unknown`` with the
    :class:`Reason` and its sentence."""

    status: BackendStatus
    violations: list[tuple[int, tuple]] = field(default_factory=list)
    reason: str | None = None
    stats: dict[str, float] = field(default_factory=dict)
    reason_code: Reason | None = None


def _builtins() -> str:
    """builtins.lp, and the program parts the relations' entries carry themselves."""
    text = resources.files("cellspec.solver.asp").joinpath("builtins.lp").read_text("utf-8")
    extra = [r.asp_text for r in relations.BUILTINS.values() if r.asp_text]
    return "\n".join([text, *extra]) if extra else text


def placement_permutation(inst: Instance) -> np.ndarray | None:
    """ASP index k -> layout index: parts are numbered in placement order when there is
    one, so ``before(P, Q)`` is simply ``P < Q`` (no order facts, no joins)."""
    if inst.order_pos is None:
        return None
    return np.argsort(inst.order_pos, kind="stable")


# pair relations decided by the numpy kernel (cellspec/core/geometry.py, the reference
# meaning) on the broad-phase candidates and handed to clingo as atoms: no join of box/7
# facts to ground. Their ASP definitions in builtins.lp stay (and are differential-tested)
# but are not grounded.
DECIDED = (*sorted(relations.names(lambda r: r.two_parts)), *FAMILY_PART.values(),
           *sorted(relations.names(lambda r: r.family == "surface")))
IntArray = npt.NDArray[np.int64]


def decided_facts(inst: Instance, prog: CompiledProgram, boxes: np.ndarray, i: np.ndarray,
                  j: np.ndarray, cols: tuple[np.ndarray, np.ndarray] | None,
                  perm: np.ndarray | None = None) -> list[str]:
    """The atoms of every pair relation the program uses, decided in numpy on the
    candidate pairs (i < j) (``above``: on the column pairs), and of the program parts
    numpy decides for one part (:data:`PART_FACTS`)."""
    kern = Kernel(inst, perm, boxes, i, j, cols)
    out: list[str] = pushed_facts(kern, prog, _unary)
    for part in sorted(prog.parts, key=str):
        name = str(part[0])
        r = relations.BUILTINS.get(name)
        if r is not None and r.two_parts:
            out.extend(_pair_facts(kern, r, part, i, j, cols))
        elif (fam := _part_family(name)) is not None:
            out.extend(PART_FACTS[fam[0]](kern, prog, boxes, fam[1]))
    for rel, zname in sorted(prog.outside):  # the complement of inside(P, zone): few facts
        m = kern.zone(rel, zname)
        pred = relations.get(rel).complement
        out.append(f"#defined {pred}/2.")
        out.append("\n".join(f'{pred}({k},"{zname}").' for k in np.nonzero(~m)[0].tolist()))
    return out


def _pair_facts(kern: Kernel, r: relations.Relation, part: tuple[str | int, ...],
                i: IntArray, j: IntArray, cols: tuple[IntArray, IntArray] | None) -> list[str]:
    """A pair relation's atoms on the candidate pairs: one orientation and a rule when it
    is symmetric, else both (near: with its distance; flanks: per axis)."""
    name, out = r.name, []
    if r.param == "length":  # symmetric, with its distance
        d = int(part[1])
        m = kern.mask(name, i, j, d)
        rows = np.stack([i[m], j[m]], axis=1)
        out.append(f"#defined {name}/3. {name}(J,I,{d}) :- {name}(I,J,{d}).")
        out.append(_rows(name, np.hstack([rows, np.full((len(rows), 1), d)])))
    elif r.param == "axis":
        out.append(f"#defined {name}/3.")
        for ax in ("x", "y"):
            rows = _pairs_both(i, j, kern.flanks(i, j, ax), kern.flanks(j, i, ax))
            if len(rows):
                out.append("\n".join(f"{name}({q},{p},{ax})." for q, p in rows.tolist()))
    elif r.symmetric:  # one orientation, and a rule
        m = kern.mask(name, i, j)
        out.append(f"#defined {name}/2. {name}(J,I) :- {name}(I,J).")
        out.append(_rows(name, np.stack([i[m], j[m]], axis=1)))
    elif r.family != "column" or cols is not None:  # both orientations
        out.append(f"#defined {name}/2.")
        out.append(_rows(name, kern.pair_rows(name, None)))
    return out


Rels = list[relations.Relation]


def _zone_facts(kern: Kernel, prog: CompiledProgram, boxes: IntArray, rels: Rels) -> list[str]:
    """The zone relations' atoms (their grid functions, the kernel's ``zone``) of the
    (relation, zone) pairs the rules ask about."""
    out = [" ".join(f"#defined {r.name}/2." for r in rels)]
    for rel, zname in _zone_uses(prog, kern.inst):
        out.append(_unary(f'{rel}({{}},"{zname}")', kern.zone(rel, zname)))
    return out


def _robot_facts(kern: Kernel, prog: CompiledProgram, boxes: IntArray, rels: Rels
                 ) -> list[str]:
    """A robot relation's atoms (its grid function; reachable(p, r): the grasp point
    within the robot's reach) of every robot."""
    inst = kern.inst
    out = []
    for r in rels:
        assert r.grid is not None, r.name
        out.append(f"#defined {r.name}/2.")
        for rname in inst.robots:
            m = r.grid(boxes, (inst.reach or {})[rname])
            out.append(_unary(f'{r.name}({{}},"{rname}")', m))
    return out


def _surface_facts(kern: Kernel, prog: CompiledProgram, boxes: IntArray, rels: Rels
                   ) -> list[str]:
    """A surface relation's atoms (its grid function, under its ``asp_atom``): of every
    surface by name (``on_surface(p, s)``), or of any surface (``grounded(p)``)."""
    out = []
    for r in rels:
        grid, pred, surfaces = r.grid, r.asp_atom or r.name, kern.inst.surfaces
        assert grid is not None, r.name
        if r.arity == 2:
            out.append(f"#defined {pred}/2.")
            for sname, z in sorted(surfaces.items()):
                out.append(_unary(f'{pred}({{}},"{sname}")', grid(boxes, z, kern.eps)))
        else:
            out.extend((f"#defined {pred}/1.", _unary(f"{pred}({{}})", kern.grounded(r))))
    return out


# the clingo facts of the one-part families whose atoms numpy decides, per family: a
# family's shared program part (compile.FAMILY_PART: "zones", "reach") holds every
# relation of the family, a surface relation's part (its name) the relation alone
PART_FACTS: dict[str, Callable[[Kernel, CompiledProgram, IntArray, Rels], list[str]]] = {
    "zone": _zone_facts, "robot": _robot_facts, "surface": _surface_facts}


def _part_family(name: str) -> tuple[str, Rels] | None:
    """The family and the relations whose facts program part ``name`` holds (read from
    the table at call time), or None: not a part :data:`PART_FACTS` writes."""
    shared = {part: fam for fam, part in FAMILY_PART.items()}
    if name in shared:
        fam = shared[name]
        return fam, [relations.BUILTINS[n] for n in sorted(relations.names(
            lambda r: r.family == fam))]
    r = relations.BUILTINS.get(name)
    if r is not None and r.family in PART_FACTS and r.family not in FAMILY_PART:
        return r.family, [r]
    return None


def decided(name: str) -> bool:
    """A program part whose atoms are facts already (:func:`decided_facts`): every pair
    relation's and the one-part families' (:data:`PART_FACTS`), read from the table at
    call time."""
    r = relations.BUILTINS.get(name)
    return _part_family(name) is not None or (r is not None and r.two_parts)


def _unary(atom: str, mask: np.ndarray) -> str:
    """Facts ``atom`` (a format with one slot for the part) for the parts in ``mask``, or,
    when fewer parts are outside it, a rule over part/1 and the exceptions: less text."""
    yes = np.nonzero(mask)[0]
    no = np.nonzero(~mask)[0]
    if len(yes) <= len(no) + 1:
        return "\n".join((atom + ".").format(k) for k in yes.tolist())
    name = "not_" + atom[:atom.index("(")] + f"_{zlib.crc32(atom.encode())}"  # one per atom
    head = atom.format("P")
    return "\n".join([f"#defined {name}/1.", f"{head} :- part(P), not {name}(P)."]
                      + [f"{name}({k})." for k in no.tolist()])


def _zone_uses(prog: CompiledProgram, inst: Instance) -> list[tuple[str, str]]:
    """(relation, zone) pairs the rules ask about, read from the compiled zuse/2 rules:
    ``zuse(R,K) :- keepout(K).`` (every keep-out) or ``zuse(R,"name").``."""
    out: set[tuple[str, str]] = set()
    for line in prog.zone_uses:
        rel = line[len("zuse("):line.index(",")]
        if ":- keepout(K)" in line:
            out.update((rel, k) for k in inst.keepouts)
        else:
            out.add((rel, line[line.index('"') + 1:line.rindex('"')]))
    return sorted(out)


def _margin(inst: Instance, prog: CompiledProgram) -> int:
    """The broad-phase margin: the rules' relations on the boxes, and for flanks on yawed
    parts the fingers' clearance from their own (not their enclosing boxes') sizes."""
    m = prog.margin_for(inst.boxes, inst.eps, inst.opening, inst.depth)
    if prog.flanks:
        m = max(m, inst.kernel().flanks_margin(inst.eps, inst.opening, inst.depth))
    return m


def facts(inst: Instance, prog: CompiledProgram, perm: np.ndarray | None = None
          ) -> tuple[str, dict]:
    """The instance as ASP facts (parts numbered by ``perm``), plus broad-phase statistics."""
    n = inst.n
    t0 = time.perf_counter()
    boxes = inst.boxes if perm is None else inst.boxes[perm]
    grippers = inst.grippers if perm is None else [inst.grippers[k] for k in perm]
    types = inst.types if perm is None else [inst.types[k] for k in perm]
    out = [f"#const eps={inst.eps}."]
    if n:
        out.append(f"part(0..{n - 1}).")
    if prog.needs_box:  # only a comparison left to clingo joins the boxes
        idx = np.arange(n, dtype=np.int64)[:, None]
        out.append(_rows("box", np.hstack([idx, boxes])))
    margin = _margin(inst, prog)
    i, j = g.broad_phase(boxes, margin)
    stats = {"candidates": float(len(i)), "broad_phase_s": time.perf_counter() - t0}
    if margin >= inst.eps:  # the stability contacts' pairs are among these: no second pass
        inst.derived.near_pairs = (i, j) if perm is None else (perm[i], perm[j])
    cols = None
    if prog.columns:
        cols = g.broad_phase(boxes, margin, columns=True)
        stats["columns"] = float(len(cols[0]))
    out.extend(_stability_facts(inst, prog, perm))  # first: placed_stable's report is reused
    out.extend(decided_facts(inst, prog, boxes, i, j, cols, perm))
    if prog.needs_grippers:
        out.extend(f"grip({k},{gk})." for k, gk in enumerate(grippers)
                   if gk != prog.default_gripper)
        out.append("other_grip(P) :- grip(P,_).")
    if prog.needs_types:
        out.append("\n".join(f'ptype({k},"{t}").' for k, t in enumerate(types)))
    for name, z in inst.surfaces.items():
        out.append(f'surf("{name}",{z}).')
    for name, zone in inst.zones.items():
        if isinstance(zone, BoxU):
            lo, hi = zone.lo, zone.hi
            out.append(f'zbox("{name}",{lo[0]},{hi[0]},{lo[1]},{hi[1]},{lo[2]},{hi[2]}).')
        else:
            sense = "gt" if zone.op in (">", ">=") else "lt"
            c = zone.coef
            out.append(f'zhalf("{name}",{c[0]},{c[1]},{c[2]},{sense},{zone.rhs}).')
    for name in inst.keepouts:
        out.append(f'keepout("{name}").')
    out.append("#defined robot/1.")
    for name in inst.robots:
        out.append(f'robot("{name}").')
    out.extend(sorted(prog.zone_uses))
    stats["facts_s"] = time.perf_counter() - t0
    return "\n".join(s for s in out if s), stats


def _stability_facts(inst: Instance, prog: CompiledProgram, perm: np.ndarray | None
                     ) -> list[str]:
    """The exceptions of the stability LP's relations the rules use (stable/1,
    placed_stable/1: cellspec/solver/stability.py), under each entry's ``complement``, in
    reference.STABILITY's order: placed_stable first, its report (stages too) is cached
    on the instance and answers stable/1 as well, where the other order would build the
    structure twice."""
    out: list[str] = []
    for name, fn in STABILITY.items():
        if name not in prog.lp:
            continue
        mask = fn(inst)
        if perm is not None:
            mask = mask[perm]
        pred = relations.get(name).complement
        out.append(f"#defined {pred}/1.")  # the exceptions only
        out.append(_rows(pred, np.nonzero(~mask)[0][:, None]))
    return out


def run(inst: Instance, prog: CompiledProgram, rule_ids: list[int],
        timeout: float | None = None) -> BackendResult:
    """Ground and solve; a time or size limit yields status ``unknown`` with a reason; a
    failure of clingo itself raises :class:`InternalError` (exit 3, never bad input)."""
    import clingo  # lazy: 70 ms, paid only by the verbs that ground (not at CLI start-up)

    n = max(inst.n, 1)
    for r in prog.rules:
        if r.index in rule_ids and r.cost >= 2 and n ** r.cost > GROUND_LIMIT:
            return BackendResult(BackendStatus.UNKNOWN, reason=(
                f"rule '{r.name}' relates {r.cost} parts with no spatial relation between them,"
                f" so it needs {inst.n}^{r.cost} bindings (limit {GROUND_LIMIT}); add a "
                "relation such as contact or near to its body"),
                reason_code=Reason.GROUNDING_LIMIT)
    t0 = time.perf_counter()
    perm = placement_permutation(inst)
    try:
        text, stats = facts(inst, prog, perm)
    except g.TooDense as exc:
        return BackendResult(BackendStatus.UNKNOWN, reason=(
            f"the layout has more than {exc.limit} pairs of parts within "
            f"{_margin(inst, prog) * float(g.U):.4f}"
            " m of each "
            "other: far denser than a buildable cell (many parts at the same place?)"),
            reason_code=exc.reason)
    rules_text = "\n".join(prog.rules[k].text for k in rule_ids)
    ctl = clingo.Control(logger=clingo_logger)
    ctl.add("base", [], _builtins())
    ctl.add("base", [], rules_text + "\n#show violation/2.\n" + text)
    parts: list[tuple[str, list[clingo.Symbol]]] = [("base", [])]
    for p in sorted(prog.parts, key=str):
        name, *args = p
        if decided(str(name)):
            continue  # its atoms are facts already (decided_facts): every pair relation's
        parts.append((str(name), [clingo.Number(int(a)) for a in args]))
    t1 = time.perf_counter()
    ctl.ground(parts)
    t2 = time.perf_counter()
    found: list[tuple[int, tuple]] = []

    def on_model(m: clingo.Model) -> None:
        found.clear()
        for s in m.symbols(shown=True):
            rid = s.arguments[0].number
            args = tuple(a.number if a.type == clingo.SymbolType.Number else a.string
                         for a in s.arguments[1].arguments)
            if perm is not None:
                args = tuple(int(perm[a]) if isinstance(a, int) else a for a in args)
                for group in prog.rules[rid].unordered:
                    # {p, q}: each pair once, named in layout order as without an order
                    vals = sorted(args[k] for k in group)
                    lst = list(args)
                    for k, v in zip(group, vals, strict=True):
                        lst[k] = v
                    args = tuple(lst)
            found.append((rid, args))

    with ctl.solve(on_model=on_model, async_=True) as handle:
        finished = handle.wait(timeout) if timeout is not None else handle.wait()
        if not finished:
            handle.cancel()
            return BackendResult(BackendStatus.UNKNOWN,
                                 reason=f"clingo did not finish within {timeout} s",
                                 reason_code=Reason.TIME_LIMIT)
        res = handle.get()
    if not res.satisfiable:  # the program only derives violations: a model always exists
        raise InternalError("clingo found no model (internal error)")
    stats.update({"facts_s": t1 - t0, "ground_s": t2 - t1, "solve_s": time.perf_counter() - t2})
    found.sort()
    return BackendResult(BackendStatus.DONE, found, stats=stats)


@dataclass(frozen=True)
class ProgramResult:
    """The shown atoms of the first model of a self-contained program; ``satisfiable`` is
    None when the time limit stopped clingo first (``reason`` and ``message`` say so)."""

    satisfiable: bool | None
    atoms: tuple = ()
    reason: Reason | None = None
    message: str = ""


def solve_program(texts: list[str], timeout: float | None) -> ProgramResult:
    """Ground ``texts`` (ASP programs, part ``base``) and solve for one model, with the
    time limit of :func:`run`: for programs whose size the caller bounds (e.g. the world
    rules), so the grounding limits of :func:`run` do not apply."""
    import clingo  # lazy: as in run(), clingo loads only when a program is solved

    ctl = clingo.Control(["1"], logger=clingo_logger)
    for text in texts:
        ctl.add("base", [], text)
    ctl.ground([("base", [])])
    atoms: list = []

    def on_model(m: clingo.Model) -> None:
        atoms[:] = m.symbols(shown=True)

    with ctl.solve(on_model=on_model, async_=True) as handle:
        finished = handle.wait(timeout) if timeout is not None else handle.wait()
        if not finished:
            handle.cancel()
            return ProgramResult(None, reason=Reason.TIME_LIMIT,
                                 message=f"clingo did not finish within {timeout} s")
        res = handle.get()
    return ProgramResult(bool(res.satisfiable), tuple(atoms))

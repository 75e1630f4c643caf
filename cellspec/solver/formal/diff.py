"""What a change to a rule file changes (``cellspec diff``), decided by Z3 over free
positions: for layouts of up to N parts of the shared part types, is NEW equivalent to,
stricter than, looser than or incomparable with OLD, per rule and for the error rules as a
whole; every difference has a witness layout re-checked with clingo. docs/diff.md."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Any

from cellspec.core import geometry as g
from cellspec.core import ir, relations
from cellspec.core.errors import CellspecError
from cellspec.core.severity import Severity
from cellspec.core.status import Status
from cellspec.dsl.model import Cell, Rule
from cellspec.layout import layout_from_obj
from cellspec.solver.formal.common import (
    DEFAULT_MAX_BINDINGS,
    FIXED_ONLY_RELATIONS,
    STABILITY_RELATIONS,
    seeded_solver,
    timeout_ms,
    var_name,
)
from cellspec.solver.instance import cell_u
from cellspec.solver.smt.backend import Unsupported, check_fragment, ground_rules
from cellspec.solver.smt.formula import Builder, Z3Lowering, lin
from cellspec.solver.smt.ground import GroundingLimit, Problem, cell_fields
from cellspec.solver.verify import check

DEFAULT_PARTS = 3
MAX_PARTS = 6


class DiffRelation(StrEnum):
    """How NEW relates to OLD, for one rule or the error rules as a whole (the words of
    ``cellspec diff``'s output, its exit code and the ``--baseline`` gate)."""

    EQUIVALENT = "equivalent"  # the same layouts pass both (up to the bound)
    STRICTER = "stricter"  # every layout NEW accepts OLD accepts, not the reverse
    LOOSER = "looser"  # every layout OLD accepts NEW accepts, not the reverse
    INCOMPARABLE = "incomparable"  # a witness each way
    UNKNOWN = "unknown"  # a limit or a rule that cannot be compared (the reason says why)


class SideState(StrEnum):
    """One direction of one question: a re-checked witness, proved empty, or undecided."""

    FOUND = "found"
    NONE = "none"
    UNKNOWN = "unknown"


RELATIONS = tuple(DiffRelation)
WHOLE = "*"  # the key of the whole error-rule set
# what a rule must not read to be compared (documented in docs/diff.md)
_OUT = {"it reads the placement order": ir.ORDER_RELATIONS,
        "it needs the stability LP": STABILITY_RELATIONS,
        "reachable() is not linear in free positions": FIXED_ONLY_RELATIONS}


@dataclass
class Side:
    """One direction of one question: ``found`` (a re-checked witness), ``none`` (proved
    empty up to the bound) or ``unknown`` (a limit, with why)."""

    state: SideState = SideState.NONE
    witness: dict | None = None
    message: str | None = None  # the re-check's words: why the other file fails it
    reason: str | None = None
    full: bool = True  # the witness passes every rule of its file `check` decides


@dataclass
class RuleDiff:
    """The relation of one rule (or of the whole error-rule set: ``rule == "*"``)."""

    rule: str
    relation: DiffRelation = DiffRelation.EQUIVALENT
    in_old: bool = True
    in_new: bool = True
    old_only: Side = field(default_factory=Side)  # passes OLD, fails NEW
    new_only: Side = field(default_factory=Side)  # passes NEW, fails OLD
    reason: str | None = None
    changed: bool = False  # its text (body, severity, weight) differs, or it is in one file
    severity: tuple[Severity | None, Severity | None] = (None, None)  # (in OLD, in NEW)

    def to_json(self) -> dict[str, Any]:
        """The rule's object of the ``cellspec.diff/1`` output."""
        out: dict[str, Any] = {"rule": self.rule, "relation": self.relation,
                               "in_old": self.in_old, "in_new": self.in_new,
                               "changed": self.changed,
                               "severity": {"old": self.severity[0], "new": self.severity[1]},
                               "witnesses": {"old_only": self.old_only.witness,
                                             "new_only": self.new_only.witness}}
        msgs = {k: s.message for k, s in (("old_only", self.old_only),
                                            ("new_only", self.new_only)) if s.message}
        if msgs:
            out["messages"] = msgs
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class DiffReport:
    """The whole answer of ``cellspec diff``."""

    relation: DiffRelation
    parts: int
    types: tuple[str, ...]
    whole: RuleDiff
    rules: list[RuleDiff]
    notes: list[str]
    seconds: float


def where(layout: dict) -> str:
    """A witness in words: ``c1 at (0.1, 0.2, 0.025), ...``."""
    return ", ".join(f"{p['id']} at ({', '.join(f'{v:g}' for v in p['pos'])})"
                     for p in layout["parts"])


def _sev(r: Rule | None) -> Severity | None:
    return None if r is None else r.severity


def _changed(a: Rule | None, b: Rule | None) -> bool:
    """Does the rule's text differ between the files (or is it in one only)?"""
    if a is None or b is None:
        return True
    return (a.body, a.severity, a.weight) != (b.body, b.severity, b.weight)


def _out_reason(r: Rule) -> str | None:
    for what, rels in _OUT.items():
        if ir.uses_relation(r.body, rels):
            return what
    return None


def _relation(d: RuleDiff) -> DiffRelation:
    a, b = d.old_only.state, d.new_only.state
    if a == SideState.NONE and b == SideState.NONE:
        return DiffRelation.EQUIVALENT
    if a == SideState.FOUND and b == SideState.FOUND:
        return DiffRelation.INCOMPARABLE
    if a == SideState.FOUND and b == SideState.NONE:
        return DiffRelation.STRICTER
    if a == SideState.NONE and b == SideState.FOUND:
        return DiffRelation.LOOSER
    return DiffRelation.UNKNOWN


def _part_sets(types: list[str], n: int):
    for k in range(1, n + 1):
        yield from itertools.combinations_with_replacement(types, k)


def _problem(cell: Cell, types: tuple[str, ...], box: tuple[list[Fraction], list[Fraction]]
             ) -> tuple[Problem, dict]:
    """Free parts of ``types`` (centres on the 0.1 mm grid, inside ``box`` grown by half a
    part) with ``cell``'s zones, surfaces and tolerances; no order (order rules are out)."""
    corners, bounds = [], {}
    res = g.RESOLUTION
    for i, t in enumerate(types):
        size = cell.part_types[t].size
        s = [int(round(Fraction(v) / res)) for v in size]
        row = []
        for k, a in enumerate("xyz"):
            v = (a.upper(), i)
            half = Fraction(size[k]) / 2
            bounds[v] = (int((box[0][k] - half) / res) - 2, int((box[1][k] + half) / res) + 2)
            row += [lin(-s[k], (v, 2)), lin(s[k], (v, 2))]
        corners.append(row)

    def before(i: int, j: int):  # pragma: no cover - order rules are never grounded here
        raise CellspecError("internal: an order rule reached the diff encoding")

    prob = Problem(n=len(types), corners=corners, types=types,
                   grippers=tuple(cell.default_gripper.kind for _ in types),
                   before=before, neighbours=None, **cell_fields(cell_u(cell)))
    return prob, bounds


def _layout(model, low, types: tuple[str, ...]) -> dict:
    seen: dict[str, int] = {}
    parts = []
    for i, t in enumerate(types):
        seen[t] = seen.get(t, 0) + 1
        pos = [round(model.eval(low.var((a, i)), model_completion=True).as_long()
                     * float(g.RESOLUTION), 4) for a in "XYZ"]
        parts.append({"id": f"{t}{seen[t]}", "type": t, "pos": pos})
    return {"units": "m", "parts": parts}


def _fails(cell: Cell, obj: dict, names: set[str]) -> tuple[bool, str | None, bool]:
    """Does clingo's check of the layout violate one of ``names`` (errors, warnings and
    preferences)? (violated, the first such violation's message, the full check passes)."""
    v = check(cell, layout_from_obj(obj, "<diff witness>"))
    if v.verdict == Status.UNKNOWN:
        raise _Recheck(f"clingo could not re-check a witness: {v.reason}")
    hits = [x for x in (*v.violations, *v.warnings, *v.preferences) if x.rule in names]
    return bool(hits), (f"{hits[0].rule}({', '.join(hits[0].parts)}): {hits[0].message}"
                        if hits else None), v.verdict == Status.PASS


class _Recheck(Exception):
    pass


def diff(old: Cell, new: Cell, parts: int = DEFAULT_PARTS, *, rule: str | None = None,
         timeout: float | None = 30.0, max_bindings: int = DEFAULT_MAX_BINDINGS
         ) -> DiffReport:
    """Compare the rules of two cells over every layout of 1..``parts`` parts of their
    shared part types (docs/diff.md); witnesses are re-checked with clingo."""
    t0 = time.perf_counter()
    if not 1 <= parts <= MAX_PARTS:
        raise CellspecError(f"--parts: expected 1 to {MAX_PARTS}, got {parts}")
    timeout_ms(timeout)  # validates it
    notes: list[str] = []
    shared, box = _space(old, new, notes)
    orules = {r.name: r for r in old.rules}
    nrules = {r.name: r for r in new.rules}
    names = list(dict.fromkeys([*orules, *nrules]))
    if rule is not None and rule not in names:
        raise CellspecError(f"--rule: no rule {rule!r} in either file (rules: "
                            f"{', '.join(names)})")
    diffs = {n: RuleDiff(n, in_old=n in orules, in_new=n in nrules,
                         changed=_changed(orules.get(n), nrules.get(n)),
                         severity=(_sev(orules.get(n)), _sev(nrules.get(n))))
             for n in names}
    prefs = [n for n in names if Severity.PREFERENCE in diffs[n].severity]
    if prefs:
        notes.append("preference rules never fail a layout: compared one by one, not part "
                     "of the error rules' relation: " + ", ".join(prefs))
    whole = RuleDiff(WHOLE)
    encoded, skipped = _classify(names, orules, nrules, diffs, _Same(old, new))
    if skipped:
        notes.append("identical in both files and not compared: " + ", ".join(skipped))
    targets = [n for n in encoded if rule in (None, n)]
    pending = {(k, s) for k in [*targets, WHOLE] for s in ("old_only", "new_only")}
    for n in targets:  # a rule in one file only: the other file accepts everything
        if n not in orules:  # nothing fails OLD's (absent) rule
            pending.discard((n, "new_only"))
        if n not in nrules:
            pending.discard((n, "old_only"))
    q = _Search(old, new, orules, nrules, encoded, targets, box, max_bindings,
                None if timeout is None else t0 + timeout, timeout)
    q.run(shared, parts, pending, diffs, whole)
    for d in [*diffs.values(), whole]:
        if d.reason and d.relation == DiffRelation.UNKNOWN:
            continue
        d.relation = _relation(d)
        if d.relation == DiffRelation.UNKNOWN and not d.reason:
            d.reason = d.old_only.reason or d.new_only.reason
    if not (whole.old_only.full and whole.new_only.full):
        # an identical rule left out keeps "every layout NEW accepts OLD accepts" (and its
        # converse), but the witness may fail that rule in both files: say so
        notes.append("a whole-set witness passes its file's compared rules but fails a rule "
                     "left out (identical in both files): it shows the difference of the "
                     "compared rules only")
    open_err = [n for n in names if n not in encoded and n not in skipped
                and any(r.severity == Severity.ERROR for r in (orules.get(n), nrules.get(n)) if r)]
    if open_err:
        whole.relation = DiffRelation.UNKNOWN
        whole.reason = ("an error rule that differs could not be compared: "
                        + ", ".join(open_err))
    rules_out = [diffs[n] for n in names if rule in (None, n)]
    top = diffs[rule] if rule is not None else whole
    return DiffReport(relation=top.relation, parts=parts, types=tuple(shared), whole=whole,
                      rules=rules_out, notes=notes, seconds=time.perf_counter() - t0)


def _space(old: Cell, new: Cell, notes: list[str]
           ) -> tuple[list[str], tuple[list[Fraction], list[Fraction]]]:
    """The shared part types (same name and size) and the box positions range over (around
    both workspaces), with a note for what differs."""
    shared = sorted(t for t in old.part_types if t in new.part_types
                    and tuple(old.part_types[t].size) == tuple(new.part_types[t].size))
    others = sorted(set(old.part_types) ^ set(new.part_types)
                    | {t for t in old.part_types if t in new.part_types and t not in shared})
    if others:
        notes.append(f"part types not in both files with one size are not compared: "
                     f"{', '.join(others)}")
    round_ = [t for t in shared if old.part_types[t].shape != "box"
              or new.part_types[t].shape != "box"]
    if round_:  # the free-position encoding knows boxes only (lint's too)
        notes.append(f"NOT COMPARED: cylinder part types are placed in no layout (the "
                     f"encoding of free parts knows boxes only), so what the rules say about "
                     f"them is not compared: {', '.join(round_)}")
        shared = [t for t in shared if t not in round_]
    if not shared:
        raise CellspecError("diff: the two cells share no box part type (same name and "
                            "size); nothing to compare")
    ows, nws = old.workspace, new.workspace
    if (ows.lo, ows.hi) != (nws.lo, nws.hi):
        notes.append("the workspaces differ: positions range over the box around both")
    box = ([min(Fraction(a), Fraction(b)) for a, b in zip(ows.lo, nws.lo, strict=True)],
           [max(Fraction(a), Fraction(b)) for a, b in zip(ows.hi, nws.hi, strict=True)])
    return shared, box


class _Same:
    """Do the two cells agree on every constant a rule reads (conservatively)?"""

    def __init__(self, old: Cell, new: Cell):
        self.a, self.b = cell_fields(cell_u(old)), cell_fields(cell_u(new))
        self.old, self.new = old, new

    def __call__(self, r: Rule) -> bool:
        """True if ``r`` reads nothing on which the cells differ."""
        keys = ["eps", "opening", "depth"]
        doms = {n.domain for n in ir.walk(r.body) if isinstance(n, ir.Quant)}

        def reads(*families: str) -> bool:  # by the table: a new relation is covered too
            return ir.uses_relation(r.body, relations.names(lambda x: x.family in families))

        if reads("zone") or "keepout" in doms:
            keys += ["zones", "keepouts"]
        if reads("surface") or ir.uses_relation(r.body, STABILITY_RELATIONS):
            keys.append("surfaces")
        if reads("robot") or ir.uses_relation(r.body, FIXED_ONLY_RELATIONS) or "robot" in doms:
            keys += ["robots", "reach"]
        o, n = self.old, self.new
        if any(self.a[k] != self.b[k] for k in keys) or o.default_gripper != n.default_gripper:
            return False
        if ir.uses_relation(r.body, STABILITY_RELATIONS):
            def parts(c: Cell) -> dict:
                return {k: (v.size, v.mass, v.shape) for k, v in c.part_types.items()}

            return (o.friction, o.stability_margin, parts(o)) == \
                (n.friction, n.stability_margin, parts(n))
        return True


def _classify(names: list[str], orules: dict, nrules: dict, diffs: dict, reads_same: _Same
              ) -> tuple[list[str], list[str]]:
    """(the rules Z3 compares, the rules left out that are identical in both files); a rule
    left out that differs gets ``unknown`` naming why."""
    encoded: list[str] = []
    skipped: list[str] = []
    for n in names:
        pair = [r for r in (orules.get(n), nrules.get(n)) if r is not None]
        same = (len(pair) == 2 and pair[0].body == pair[1].body
                and pair[0].severity == pair[1].severity and reads_same(pair[0]))
        out = [w for r in pair for w in [_out_reason(r)] if w]
        if out:
            _leave_out(diffs[n], f"not compared: {out[0]} (docs/diff.md)", same, skipped)
            continue
        try:
            check_fragment(pair)
        except CellspecError as exc:
            _leave_out(diffs[n], f"not compared: {exc.diagnostics[0].message}", same,
                       skipped)
            continue
        encoded.append(n)
    return encoded, skipped


@dataclass
class _Search:
    """The witness search, part set by part set, fewest parts first."""

    old: Cell
    new: Cell
    orules: dict
    nrules: dict
    encoded: list[str]
    targets: list[str]
    box: tuple
    max_bindings: int
    deadline: float | None
    timeout: float | None
    hold: dict = field(default_factory=dict)  # the current part set's "rule holds" literals

    def run(self, shared: list[str], parts: int, pending: set, diffs: dict,
            whole: RuleDiff) -> None:
        """Settle every pending (rule, side): a witness, or none up to ``parts`` parts."""
        import z3  # lazy: z3 only when a proof runs

        ctx = z3.Context()
        for combo in _part_sets(shared, parts):
            if not pending:
                return
            left = None if self.deadline is None else self.deadline - time.perf_counter()
            if left is not None and left <= 0:
                _give_up(pending, diffs, whole, f"time limit {self.timeout} s hit before "
                         f"{len(combo)}-part layouts were searched")
                return
            types = tuple(combo)
            try:
                solver, low, queries = self._queries(z3, ctx, types)
            except (GroundingLimit, Unsupported) as exc:
                _give_up(pending, diffs, whole, f"{exc} ({len(types)} parts)")
                return
            solver.set("timeout", max(1, int((left or 3600) * 1000)))
            for key in sorted(pending, key=lambda k: (k[0] != WHOLE, k)):
                side = getattr(whole if key[0] == WHOLE else diffs[key[0]], key[1])
                res = solver.check(*queries[key])
                if res == z3.unknown:
                    side.state = SideState.UNKNOWN
                    side.reason = f"z3 gave up: {solver.reason_unknown()} ({len(types)} parts)"
                    pending.discard(key)
                elif res == z3.sat:
                    model = solver.model()
                    rest = self._rest(key)  # a rule's witness that passes the rest too
                    if rest and solver.check(*queries[key], *rest) == z3.sat:
                        model = solver.model()
                    _confirm(side, _layout(model, low, types), key, self.old,
                             self.new, self.errors("old"), self.errors("new"))
                    pending.discard(key)

    def _rest(self, key: tuple[str, str]) -> list:
        """For a rule's question: the other compared error rules of the file the witness
        must pass, holding (tried first, so the witness is a layout that file accepts)."""
        name, s = key
        if name == WHOLE:
            return []
        tag = "old" if s == "old_only" else "new"
        return [self.hold[tag, n] for n in self.errors(tag) if n != name]

    def errors(self, tag: str) -> list[str]:
        """The compared error rules of one file."""
        rules = self.orules if tag == "old" else self.nrules
        return [n for n in self.encoded if n in rules and rules[n].severity == Severity.ERROR]

    def _queries(self, z3, ctx, types: tuple[str, ...]):
        solver, low, hold, fire = _encode(z3, ctx, self.old, self.new, types, self.box,
                                          self.orules, self.nrules, self.encoded,
                                          self.max_bindings)
        self.hold = hold
        t = z3.BoolVal(True, ctx)
        f = z3.BoolVal(False, ctx)
        oerr, nerr = self.errors("old"), self.errors("new")
        any_o = z3.Or([fire["old", n] for n in oerr] or [f])
        any_n = z3.Or([fire["new", n] for n in nerr] or [f])
        queries = {(WHOLE, "old_only"): [hold["old", n] for n in oerr] + [any_n],
                   (WHOLE, "new_only"): [hold["new", n] for n in nerr] + [any_o]}
        for n in self.targets:
            queries[n, "old_only"] = [hold.get(("old", n), t), fire.get(("new", n), f)]
            queries[n, "new_only"] = [hold.get(("new", n), t), fire.get(("old", n), f)]
        return solver, low, queries


def _leave_out(d: RuleDiff, why: str, same: bool, skipped: list[str]) -> None:
    if same:
        d.relation, d.reason = DiffRelation.EQUIVALENT, why + "; identical in both files"
        skipped.append(d.rule)
    else:
        d.relation, d.reason = DiffRelation.UNKNOWN, why + "; it differs between the files"


def _give_up(pending: set, diffs: dict, whole: RuleDiff, why: str) -> None:
    for k, s in pending:
        side = getattr(whole if k == WHOLE else diffs[k], s)
        side.state, side.reason = SideState.UNKNOWN, why
    pending.clear()


def _confirm(side: Side, obj: dict, key: tuple[str, str], old: Cell, new: Cell,
             oerr: list[str], nerr: list[str]) -> None:
    """Re-check a Z3 witness with clingo: it must pass one file and fail the other."""
    name, s = key
    keep, drop = (old, new) if s == "old_only" else (new, old)
    kset, dset = ((set(oerr), set(nerr)) if s == "old_only" else (set(nerr), set(oerr))) \
        if name == WHOLE else ({name}, {name})
    try:
        ok_fail, _, full = _fails(keep, obj, kset)
        bad_fail, msg, _ = _fails(drop, obj, dset)
    except _Recheck as exc:
        side.state, side.reason = SideState.UNKNOWN, str(exc)
        return
    if ok_fail or not bad_fail:
        side.state = SideState.UNKNOWN
        side.reason = ("a Z3 witness did not re-check with clingo (an internal "
                       "disagreement, please report): " + str(obj))
        return
    side.state, side.witness, side.message, side.full = SideState.FOUND, obj, msg, full


def _encode(z3, ctx, old: Cell, new: Cell, types, box, orules, nrules, encoded, max_b):
    """A solver over free parts of ``types`` with, per file and encoded rule, a literal
    implying the rule holds and one implying it fails (fixed variable names: one layout)."""
    solver = seeded_solver(0, ctx, logic=None)
    solver.set("arith.solver", 2)  # as lint: faster on these queries
    low = Z3Lowering(var_name, ctx)
    hold: dict = {}
    fire: dict = {}
    bounds: dict = {}
    for tag, cell, rules in (("old", old, orules), ("new", new, nrules)):
        prob, bounds = _problem(cell, types, box)
        builder = Builder(bounds)
        mine = [rules[n] for n in encoded if n in rules]
        grounded = ground_rules(prob, mine, builder, max_b)
        for r, lst in zip(mine, grounded, strict=True):
            h = z3.Bool(f"{tag}_holds_{r.name}", ctx)
            fl = z3.Bool(f"{tag}_fires_{r.name}", ctx)
            solver.add(z3.Implies(h, low.term(builder.and_(fm for _, fm in lst))))
            solver.add(z3.Implies(fl, low.term(builder.or_(builder.not_(fm) for _, fm in lst))))
            hold[tag, r.name] = h
            fire[tag, r.name] = fl
    for v, term in list(low.vars.items()):
        lo, hi = bounds[v]
        solver.add(term >= lo, term <= hi)
    return solver, low, hold, fire

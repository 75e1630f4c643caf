"""Commit conditions and diagnosis rules: built from the DSL, compiled to clingo, decided.

``commit ACTION "msg" : EXPR`` holds when its body holds over the action's measures
(``controller_ok``, ``track_error``, ``target_error``, ``rel_error``, ``speed``,
``grasp_force``, ``ext_force``, ``contact_force``, ``contact_time``) and force events
(``event(grasp_weak)``, ``event(collision)``, ``event(contact)``, derived from the cell's
``force`` thresholds). ``diagnose CAUSE(vars) "msg" recover R [priority N] : EXPR`` derives
a cause where its pattern over the discrepancy Δ holds: ``missing(REL, a, b)``,
``unexpected(REL, a, b)``, ``cs(EXPECTED_PHASE, OBSERVED_PHASE)``, ``new(x)``, ``lost(x)``,
``in_path(x)``, ``target(x)``, ``event(E)``, ``drift(x) > D``, ``x != y``; a top-level
``or`` gives alternative patterns. Names in object positions that are not ``gripper``,
``_`` or a surface are variables. Every rule is lowered to an ASP program and solved with
clingo; nothing is decided in Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from textx import get_location

from cellspec.core.errors import CellspecError
from cellspec.dsl.model import Cell, ForceThreshold, Source, WorldRule, WorldSpec
from cellspec.world.db import PHASES
from cellspec.world.db import RELATIONS as RELS

ACTIONS = ("pick", "place", "insert")
# measure -> (kind, integer scale): lengths in 0.1 mm, forces in 0.01 N, times in ms
MEASURES: dict[str, tuple[str, int]] = {
    "controller_ok": ("flag", 1), "track_error": ("length", 10_000),
    "target_error": ("length", 10_000), "rel_error": ("length", 10_000),
    "speed": ("speed", 10_000), "grasp_force": ("force", 100), "ext_force": ("force", 100),
    "contact_force": ("force", 100), "contact_time": ("time", 1000),
}
FORCES = {"grasp": "grasp force below it (N): the grasp failed (event grasp_weak)",
          "collision": "|F_ext| above it (N) during transport: a collision (event collision)",
          "contact": "F_z above it (N) for `for` seconds during place: contact confirmed "
                     "(event contact)"}
DEFAULT_FORCES = {"grasp": (Fraction(5), None), "collision": (Fraction(15), None),
                  "contact": (Fraction(10), Fraction(1, 2))}
EVENTS = ("grasp_weak", "collision", "contact")
RECOVERIES = {
    "regrasp": "re-perceive the part and grasp it again where it now lies",
    "regrasp_other_axis": "grasp the part again with the other grip axis",
    "retarget": "re-perceive the part and put it back on its target",
    "replan_keepout": "add the unexpected object as a keep-out and re-plan the path around it",
    "reperceive": "observe again before going on",
    "stop": "stop and ask the operator",
}
DIAG_PREDS: dict[str, tuple[str, ...]] = {
    "missing": ("rel", "obj", "obj"), "unexpected": ("rel", "obj", "obj"),
    "cs": ("phase", "phase"), "new": ("obj",), "lost": ("obj",), "in_path": ("obj",),
    "target": ("obj",), "event": ("event",), "drift": ("obj",),
}
_EVENT_RULES = """
event(grasp_weak) :- m(grasp_force, F), thr(grasp, T), F < T.
event(collision) :- m(ext_force, F), thr(collision, T), F > T.
event(contact) :- m(contact_force, F), thr(contact, T), F > T, m(contact_time, S),
                  dur(contact, D), S >= D.
"""


# -- building from the parse tree ------------------------------------------------------
class _TreeBuilder:
    """Turns a textX expression into a term tree, checking the vocabulary of its kind."""

    def __init__(self, b: Any, kind: str, scale: Fraction, surfaces: set[str]):
        self.b, self.kind, self.scale, self.surfaces = b, kind, scale, surfaces
        self.ok = True

    def err(self, node: Any, msg: str) -> None:
        self.ok = False
        self.b.err(node, msg)

    def tree(self, node: Any) -> Any:
        cls = type(node).__name__
        if cls in ("Expr", "Implies", "ImpliesRhs"):
            if getattr(node, "right", None) is not None:
                self.err(node, "`implies` is not used in commit/diagnose rules")
                return None
            return self.tree(node.left)
        if cls == "Quant":
            self.err(node, "quantifiers are not used in commit/diagnose rules")
            return None
        if cls in ("Or", "And"):
            ops = [self.tree(o) for o in node.ops]
            return ops[0] if len(ops) == 1 else (cls.lower(), tuple(ops))
        if cls == "NotExpr":
            return ("not", self.tree(node.operand))
        if cls == "Cmp":
            if node.op:
                return ("cmp", node.op, self.tree(node.left), self.tree(node.right),
                        self._loc(node))
            return self.tree(node.left)
        if cls in ("Sum", "Prod"):
            if len(node.ops) != 1:
                self.err(node, "arithmetic is not used in commit/diagnose rules")
                return None
            return self.tree(node.ops[0])
        if cls == "Unary":
            inner = self.tree(node.operand)
            if node.minus:
                if inner is None or inner[0] != "num":
                    self.err(node, "a minus sign needs a number")
                    return None
                return ("num", -inner[1])
            return inner
        if cls == "Paren":
            return self.tree(node.expr)
        if cls == "NumLit":
            return ("num", Fraction(node.value))
        if cls == "BoolLit":
            return ("bool", node.value == "true")
        if cls == "Ref":
            return ("ref", node.name, self._loc(node))
        if cls == "Call":
            args = []
            for a in node.args:
                t = self.tree(a)
                if t is None or t[0] != "ref":
                    self.err(a, f"arguments of {node.name}(...) are names")
                    return None
                args.append(t[1])
            return ("call", node.name, tuple(args), self._loc(node))
        self.err(node, f"{cls.lower()} is not used in commit/diagnose rules")
        return None

    def _loc(self, node: Any) -> tuple[int, int]:
        loc = get_location(node)
        return (loc["line"], loc["col"])


def _at(b: Any, loc: tuple[int, int], msg: str) -> None:
    b.sink.add(b.cur.shown, loc[0], loc[1], msg)


def _check_commit(b: Any, t: Any, forces: set[str], top: bool = True) -> bool:
    """Vocabulary of a commit body; reports problems with their location."""
    if t is None:
        return False
    k = t[0]
    if k in ("and", "or"):
        return all([_check_commit(b, x, forces, False) for x in t[1]])
    if k == "not":
        return _check_commit(b, t[1], forces, False)
    if k == "bool":
        return True
    if k == "ref":
        m = MEASURES.get(t[1])
        if m is None:
            _at(b, t[2], f"unknown measure '{t[1]}' (measures: {', '.join(MEASURES)})")
            return False
        if m[0] != "flag":
            _at(b, t[2], f"'{t[1]}' is a number: compare it, e.g. `{t[1]} <= 0.005`")
            return False
        return True
    if k == "call":
        if t[1] != "event" or len(t[2]) != 1 or t[2][0] not in EVENTS:
            _at(b, t[3], f"expected event(E) with E one of {', '.join(EVENTS)}")
            return False
        return True
    if k == "cmp":
        lhs, rhs = t[2], t[3]
        if lhs is None or rhs is None:
            return False
        if lhs[0] == "ref" and lhs[1] not in MEASURES:
            _at(b, lhs[2], f"unknown measure '{lhs[1]}' (measures: {', '.join(MEASURES)})")
            return False
        if lhs[0] != "ref" or MEASURES[lhs[1]][0] == "flag":
            _at(b, t[4], "a comparison needs a numeric measure on the left "
                f"({', '.join(m for m, v in MEASURES.items() if v[0] != 'flag')})")
            return False
        if rhs[0] == "ref" and rhs[1] not in forces:
            _at(b, rhs[2], f"unknown threshold '{rhs[1]}' (the force thresholds: "
                f"{', '.join(FORCES)})")
            return False
        if rhs[0] == "ref" and MEASURES[lhs[1]][0] != "force":
            _at(b, rhs[2], f"'{lhs[1]}' is not a force: compare it with a number")
            return False
        if rhs[0] not in ("num", "ref"):
            _at(b, t[4], "compare a measure with a number or a force threshold")
            return False
        return True
    return False


def _disjuncts(t: Any) -> list[Any]:
    return list(t[1]) if t is not None and t[0] == "or" else [t]


def _literals(t: Any) -> list[Any]:
    return list(t[1]) if t is not None and t[0] == "and" else [t]


def _check_diag(b: Any, t: Any, params: tuple[str, ...], surfaces: set[str]) -> bool:
    """Vocabulary and variable safety of a diagnose body."""
    ok = True
    for d in _disjuncts(t):
        bound: set[str] = set()
        used: list[tuple[str, tuple[int, int]]] = []
        for lit in _literals(d):
            neg = False
            if lit is not None and lit[0] == "not":
                neg, lit = True, lit[1]
            if lit is None:
                return False
            if lit[0] in ("and", "or", "not"):
                loc = _first_loc(lit)
                _at(b, loc, "a diagnose pattern is a conjunction of literals (use `or` only "
                    "at the top level)")
                ok = False
                continue
            if lit[0] == "call":
                name, args, loc = lit[1], lit[2], lit[3]
                sig = DIAG_PREDS.get(name)
                if sig is None or name == "drift":
                    _at(b, loc, f"unknown pattern '{name}' (patterns: "
                        f"{', '.join(p for p in DIAG_PREDS if p != 'drift')}, drift(x) > D)")
                    ok = False
                    continue
                if len(args) != len(sig):
                    _at(b, loc, f"{name} takes {len(sig)} arguments")
                    ok = False
                    continue
                for a, kind in zip(args, sig, strict=True):
                    if kind == "rel" and a not in RELS + ("_",):
                        _at(b, loc, f"unknown relation '{a}' (relations: {', '.join(RELS)})")
                        ok = False
                    elif kind == "phase" and a not in PHASES + ("_",):
                        _at(b, loc, f"unknown phase '{a}' (phases: {', '.join(PHASES)})")
                        ok = False
                    elif kind == "event" and a not in EVENTS + ("_",):
                        _at(b, loc, f"unknown event '{a}' (events: {', '.join(EVENTS)})")
                        ok = False
                    elif kind == "obj" and _is_var(a, surfaces):
                        if neg:
                            used.append((a, loc))
                        else:
                            bound.add(a)
                continue
            if lit[0] == "cmp":
                lhs, rhs, loc = lit[2], lit[3], lit[4]
                if neg:
                    _at(b, loc, "write the negated comparison instead (`<=` for `not >`)")
                    ok = False
                    continue
                if lhs is not None and lhs[0] == "call" and lhs[1] == "drift":
                    if len(lhs[2]) != 1 or rhs is None or rhs[0] != "num":
                        _at(b, loc, "write drift(x) OP LENGTH, e.g. drift(o) > 0.01")
                        ok = False
                        continue
                    if _is_var(lhs[2][0], surfaces):
                        bound.add(lhs[2][0])
                    continue
                if lhs is not None and rhs is not None and lhs[0] == rhs[0] == "ref" \
                        and lit[1] in ("==", "!="):
                    for r in (lhs, rhs):
                        if _is_var(r[1], surfaces):
                            used.append((r[1], r[2]))
                    continue
                _at(b, loc, "compare drift(x) with a length, or two names with == / !=")
                ok = False
                continue
            if lit[0] == "ref":
                _at(b, lit[2], f"'{lit[1]}' alone is not a pattern (patterns: "
                    f"{', '.join(p for p in DIAG_PREDS if p != 'drift')})")
                ok = False
                continue
            _at(b, _first_loc(lit) or (0, 0), "not a diagnose pattern")
            ok = False
        for v, loc in used:
            if v not in bound:
                _at(b, loc, f"variable '{v}' must appear in a positive pattern first "
                    "(e.g. target(x), missing(on, x, _))")
                ok = False
        for p in params:
            if p not in bound:
                _at(b, _first_loc(d) or (0, 0), f"parameter '{p}' is not bound by every "
                    "alternative of the pattern")
                ok = False
    return ok


def _is_var(a: str, surfaces: set[str]) -> bool:
    return a not in ("_", "gripper") and a not in surfaces


def _first_loc(t: Any) -> tuple[int, int] | None:
    if isinstance(t, tuple):
        for x in t:
            if isinstance(x, tuple) and len(x) == 2 and all(isinstance(v, int) for v in x):
                return x  # type: ignore[return-value]
            r = _first_loc(x)
            if r:
                return r
    return None


def build_world(b: Any, cell_file: Any, cell_st: Any) -> WorldSpec:
    """Force thresholds of the cell and the commit/diagnose rules of every loaded file.

    A rule of a later file (the importer) overrides one of the same name (action kind or
    cause) from an earlier file (an import, e.g. the standard diagnosis library)."""
    forces: dict[str, ForceThreshold] = {}
    b.cur = cell_file
    for item in cell_st.items:
        if type(item).__name__ != "Force":
            continue
        if item.name not in FORCES:
            b.err(item, f"unknown force threshold '{item.name}' (thresholds: "
                  f"{', '.join(FORCES)})")
            continue
        if item.name in forces:
            b.err(item, f"force {item.name} is given twice")
            continue
        v = Fraction(item.value)
        dur = Fraction(item.duration) if item.duration is not None else None
        if v < 0 or (dur is not None and dur < 0):
            b.err(item, "a force threshold and its duration must not be negative")
            continue
        if dur is not None and item.name != "contact":
            b.err(item, "only the contact threshold takes `for SECONDS`")
            continue
        forces[item.name] = ForceThreshold(name=item.name, value=v, duration=dur,
                                           source=b.src(item))
    surfaces = {s.name for s in getattr(b, "_surfaces", ())}
    for st in cell_st.items:
        if type(st).__name__ == "Surface":
            surfaces.add(st.name)
    surfaces.add("table")
    commits: dict[str, WorldRule] = {}
    diags: dict[str, WorldRule] = {}
    for key in b.order:
        f = b.files[key]
        b.cur = f
        local: set[tuple[str, str]] = set()
        for st in f.model.statements:
            cls = type(st).__name__
            if cls not in ("Commit", "Diagnose"):
                continue
            tb = _TreeBuilder(b, cls.lower(), f.scale, surfaces)
            body = tb.tree(st.body)
            src = b.src(st)
            name = st.action if cls == "Commit" else st.cause
            if (cls, name) in local:
                b.err(st, f"{cls.lower()} {name} is given twice in this file")
                continue
            local.add((cls, name))
            if cls == "Commit":
                if st.action not in ACTIONS:
                    b.err(st, f"unknown action kind '{st.action}' (actions: "
                          f"{', '.join(ACTIONS)})")
                    continue
                if not tb.ok or not _check_commit(b, body, set(FORCES)):
                    continue
                commits[name] = WorldRule(kind="commit", name=name,
                                          message=_unescape(st.message),
                                          body=_scale(body, f.scale), source=src)
            else:
                params = tuple(st.params)
                if len(set(params)) != len(params):
                    b.err(st, f"diagnose {name}: a parameter is named twice")
                    continue
                if st.recovery not in RECOVERIES:
                    b.err(st, f"unknown recovery '{st.recovery}' (recoveries: "
                          f"{', '.join(RECOVERIES)})")
                    continue
                pr = Fraction(st.priority) if st.priority is not None else Fraction(0)
                if pr.denominator != 1:
                    b.err(st, "priority must be a whole number")
                    continue
                msg = _unescape(st.message)
                for ph in re.findall(r"\{([^{}]*)\}", msg):
                    if ph not in params:
                        b.err(st, f"placeholder {{{ph}}} names no parameter of {name}")
                        tb.ok = False
                if not tb.ok or not _check_diag(b, body, params, surfaces):
                    continue
                diags[name] = WorldRule(kind="diagnose", name=name, message=msg,
                                        params=params, recovery=st.recovery,
                                        priority=int(pr), body=_scale(body, f.scale),
                                        source=src)
    b.cur = cell_file
    return WorldSpec(forces=forces, commits=tuple(commits.values()),
                     diagnoses=tuple(diags.values()))


def _unescape(s: str) -> str:
    return s.replace('\\"', '"').replace("\\\\", "\\")


def _scale(t: Any, scale: Fraction) -> Any:
    """Lengths in a file with `units mm` become metres (comparisons of lengths only)."""
    if scale == 1 or not isinstance(t, tuple):
        return t
    if t[0] == "cmp":
        lhs, rhs = t[2], t[3]
        length = (lhs[0] == "ref" and MEASURES.get(lhs[1], ("", 0))[0] in ("length", "speed")) \
            or (lhs[0] == "call" and lhs[1] == "drift")
        if length and rhs[0] == "num":
            rhs = ("num", rhs[1] * scale)
        return ("cmp", t[1], lhs, rhs, t[4])
    if t[0] in ("and", "or"):
        return (t[0], tuple(_scale(x, scale) for x in t[1]))
    if t[0] == "not":
        return ("not", _scale(t[1], scale))
    return t


# -- printing ------------------------------------------------------------------------
def show(t: Any) -> str:
    """A term tree back as DSL text (for reasons and reports)."""
    k = t[0]
    if k in ("and", "or"):
        return f" {k} ".join(f"({show(x)})" if x[0] in ("and", "or") else show(x) for x in t[1])
    if k == "not":
        return f"not {show(t[1])}"
    if k == "cmp":
        return f"{show(t[2])} {t[1]} {show(t[3])}"
    if k == "num":
        return str(float(t[1])) if t[1].denominator != 1 else str(t[1].numerator)
    if k == "bool":
        return "true" if t[1] else "false"
    if k == "ref":
        return t[1]
    if k == "call":
        return f"{t[1]}({', '.join(t[2])})"
    return "?"


# -- lowering to ASP -------------------------------------------------------------------
def force_thresholds(cell: Cell) -> dict[str, tuple[Fraction, Fraction | None]]:
    """Each force threshold (N) with its duration (s): the cell's, else the default."""
    out = dict(DEFAULT_FORCES)
    for name, f in cell.world.forces.items():
        out[name] = (f.value, f.duration if f.duration is not None else
                     (DEFAULT_FORCES[name][1] if name == "contact" else None))
    return out


def _thr_facts(cell: Cell) -> str:
    lines = []
    for name, (v, dur) in sorted(force_thresholds(cell).items()):
        lines.append(f"thr({name}, {round(v * 100)}).")
        if name == "contact":
            lines.append(f"dur(contact, {round((dur or 0) * 1000)}).")
    return "\n".join(lines)


def _measure_facts(measures: dict[str, float | bool]) -> str:
    out = []
    for k in sorted(measures):
        if k not in MEASURES:
            raise CellspecError(f"unknown measure '{k}' (measures: {', '.join(MEASURES)})")
        v = measures[k]
        if isinstance(v, bool):
            iv = int(v)
        else:
            fv = float(v)
            if fv != fv or fv in (float("inf"), float("-inf")):
                raise CellspecError(f"measure '{k}' is NaN or infinite")
            iv = int(round(fv * MEASURES[k][1]))
        out.append(f"m({k}, {iv}).")
    return "\n".join(out)


def _ival(measure: str, v: Fraction) -> int:
    return int(round(v * MEASURES[measure][1]))


class _Lower:
    def __init__(self, cell: Cell) -> None:
        self.n = 0
        self.lines: list[str] = []
        self.forces = force_thresholds(cell)

    def node(self, t: Any) -> int:
        self.n += 1
        me = self.n
        k = t[0]
        if k == "and":
            kids = [self.node(x) for x in t[1]]
            self.lines.append(f"t({me}) :- {', '.join(f't({c})' for c in kids)}.")
        elif k == "or":
            for x in t[1]:
                self.lines.append(f"t({me}) :- t({self.node(x)}).")
        elif k == "not":
            self.lines.append(f"t({me}) :- not t({self.node(t[1])}).")
        elif k == "bool":
            if t[1]:
                self.lines.append(f"t({me}).")
        elif k == "ref":
            self.lines.append(f"t({me}) :- m({t[1]}, V), V != 0.")
        elif k == "call":
            self.lines.append(f"t({me}) :- event({t[2][0]}).")
        elif k == "cmp":
            meas, rhs = t[2][1], t[3]
            if rhs[0] == "num":
                c = _ival(meas, rhs[1])
                self.lines.append(f"t({me}) :- m({meas}, V), V {_asp_op(t[1])} {c}.")
            else:
                self.lines.append(f"t({me}) :- m({meas}, V), thr({rhs[1]}, T), "
                                  f"V {_asp_op(t[1])} T.")
        return me


def _asp_op(op: str) -> str:
    return {"==": "=", "!=": "!="}.get(op, op)


@dataclass(frozen=True)
class CommitDecision:
    """Whether an action's commit condition holds, and which conjuncts failed."""

    action: str
    ok: bool
    failed: tuple[str, ...]
    events: tuple[str, ...]
    rule: str  # the condition as written
    source: str

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"action": self.action, "commit": self.ok, "failed": list(self.failed),
                "events": list(self.events), "condition": self.rule, "source": self.source}


def commit_rule(cell: Cell, action: str) -> WorldRule:
    """The commit condition of an action kind; bad input when the cell has none."""
    for r in cell.world.commits:
        if r.name == action:
            return r
    raise CellspecError(f"{cell.path}: the cell has no commit condition for '{action}': "
                        "`import diagnosis` (the standard library) or write "
                        f"`commit {action} \"...\" : ...`")


def decide_commit(cell: Cell, action: str, measures: dict[str, float | bool]) -> CommitDecision:
    """Decide the action's commit condition with clingo over the observed measures."""
    rule = commit_rule(cell, action)
    low = _Lower(cell)
    conj = _literals(rule.body)
    if rule.body[0] != "and":
        conj = [rule.body]
    ids = [low.node(c) for c in conj]
    prog = [_thr_facts(cell), _measure_facts(measures), _EVENT_RULES, *low.lines,
            f"commit :- {', '.join(f't({i})' for i in ids)}.",
            *(f"failed({k}) :- not t({i})." for k, i in enumerate(ids)),
            "#show commit/0. #show failed/1. #show event/1."]
    atoms = _solve("\n".join(prog))
    failed = sorted(int(a.arguments[0].number) for a in atoms if a.name == "failed")
    events = sorted(str(a.arguments[0]) for a in atoms if a.name == "event")
    ok = any(a.name == "commit" for a in atoms)
    def why(t: Any) -> str:
        missing = sorted(m for m in _measures_of(t) if m not in measures)
        return show(t) + (f" (not measured: {', '.join(missing)})" if missing else "")

    return CommitDecision(action=action, ok=ok, failed=tuple(why(conj[k]) for k in failed),
                          events=tuple(events), rule=show(rule.body), source=str(rule.source))


def _measures_of(t: Any) -> set[str]:
    """The measures a commit term reads (events read theirs through the thresholds)."""
    if not isinstance(t, tuple):
        return set()
    k = t[0]
    if k in ("and", "or"):
        return set().union(*(_measures_of(x) for x in t[1]))
    if k == "not":
        return _measures_of(t[1])
    if k == "ref" and t[1] in MEASURES:
        return {t[1]}
    if k == "cmp":
        return _measures_of(t[2])
    if k == "call" and t[1] == "event":
        return {"grasp_weak": {"grasp_force"}, "collision": {"ext_force"},
                "contact": {"contact_force", "contact_time"}}.get(t[2][0], set())
    return set()


def _solve(program: str) -> list[Any]:
    import clingo

    ctl = clingo.Control(["--warn=none", "1"])
    ctl.add("base", [], program)
    ctl.ground([("base", [])])
    out: list[Any] = []
    with ctl.solve(yield_=True) as h:
        for model in h:
            out = list(model.symbols(shown=True))
            break
    return out


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class Finding:
    """A derived cause with its bindings, message and recovery."""

    cause: str
    args: tuple[str, ...]
    message: str
    recovery: str
    priority: int
    source: str

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"cause": self.cause, "objects": list(self.args), "message": self.message,
                "recovery": self.recovery, "recovery_means": RECOVERIES[self.recovery],
                "priority": self.priority, "source": self.source}


def _var(a: str) -> str:
    return "V_" + a


def _obj(a: str, surfaces: set[str]) -> str:
    if a == "_":
        return "_"
    return _var(a) if _is_var(a, surfaces) else _q(a)


def diagnose_program(cell: Cell) -> str:
    """The ASP rules of the cell's diagnose table (one `cause(K, (args))` head per pattern)."""
    surfaces = {s.name for s in cell.surfaces} | {"table"}
    lines = []
    for k, r in enumerate(cell.world.diagnoses):
        comma = "," if len(r.params) == 1 else ""
        head = f"cause({k}, ({', '.join(_var(p) for p in r.params)}{comma}))"
        for d in _disjuncts(r.body):
            body = []
            dn = 0
            for lit in _literals(d):
                neg = lit[0] == "not"
                if neg:
                    lit = lit[1]
                if lit[0] == "call":
                    sig = DIAG_PREDS[lit[1]]
                    args = [(_obj(a, surfaces) if kind == "obj" else a)
                            for a, kind in zip(lit[2], sig, strict=True)]
                    atom = f"{lit[1]}({', '.join(args)})"
                    body.append(("not " if neg else "") + atom)
                elif lit[0] == "cmp" and lit[2][0] == "call":
                    dn += 1
                    o = _obj(lit[2][2][0], surfaces)
                    c = int(round(lit[3][1] * 10_000))
                    body.append(f"drift({o}, D_{dn}), D_{dn} {_asp_op(lit[1])} {c}")
                else:
                    a = _obj(lit[2][1], surfaces)
                    b = _obj(lit[3][1], surfaces)
                    body.append(f"{a} {_asp_op(lit[1])} {b}")
            lines.append(f"{head} :- {', '.join(body)}.")
    return "\n".join(lines)


def diagnose_facts(cell: Cell, facts: str) -> list[Finding]:
    """Every cause the diagnose rules derive from Δ facts, ranked (priority, rule order)."""
    prog = "\n".join([_thr_facts(cell), facts, _EVENT_RULES, diagnose_program(cell),
                      "#show cause/2."])
    atoms = _solve(prog)
    found = []
    for a in atoms:
        k = a.arguments[0].number
        args = tuple(x.string if x.type.name == "String" else str(x)
                     for x in a.arguments[1].arguments)
        r = cell.world.diagnoses[k]
        msg = r.message
        for p, v in zip(r.params, args, strict=True):
            msg = msg.replace("{" + p + "}", v)
        found.append((-r.priority, k, args, Finding(cause=r.name, args=args, message=msg,
                                                    recovery=r.recovery or "stop",
                                                    priority=r.priority,
                                                    source=str(r.source))))
    found.sort(key=lambda x: x[:3])
    return [f[3] for f in found]


__all__ = ["ACTIONS", "CommitDecision", "Finding", "Source", "build_world", "commit_rule",
           "decide_commit", "diagnose_facts", "diagnose_program", "show"]

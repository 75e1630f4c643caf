"""The world-model statements of a cell, checked and built: force thresholds, commit
conditions and diagnosis rules (grammar ``world.tx``) become a :class:`WorldSpec`.

``commit ACTION "msg" : EXPR`` holds when its body holds over the action's measures
(``controller_ok``, ``track_error``, ``target_error``, ``rel_error``, ``speed``,
``grasp_force``, ``ext_force``, ``contact_force``, ``contact_time``) and force events
(``event(grasp_weak)``, ``event(collision)``, ``event(contact)``, derived from the cell's
``force`` thresholds). ``diagnose CAUSE(vars) "msg" recover R [priority N] : EXPR`` derives
a cause where its pattern over the discrepancy Δ holds: ``missing(REL, a, b)``,
``unexpected(REL, a, b)``, ``cs(EXPECTED_PHASE, OBSERVED_PHASE)``, ``new(x)``, ``lost(x)``,
``in_path(x)``, ``target(x)``, ``event(E)``, ``drift(x) > D``, ``x != y``; a top-level
``or`` gives alternative patterns. Names in object positions that are not ``gripper``,
``_`` or a surface are variables.

This module is the language side only (vocabulary, checks with file:line:col, the term
trees); cellspec/world/rules.py lowers the trees to ASP and decides them with clingo.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from textx import get_location

from cellspec.core.names import did_you_mean, unknown
from cellspec.dsl.model import ForceThreshold, WorldRule, WorldSpec

if TYPE_CHECKING:  # the builder calls build_world: a run-time import would be a cycle
    from cellspec.dsl.build import CellBuilder
    from cellspec.dsl.load import SourceFile

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
EVENTS = ("grasp_weak", "collision", "contact")
RECOVERIES = {
    "regrasp": "re-perceive the part and grasp it again where it now lies",
    "regrasp_other_axis": "grasp the part again with the other grip axis",
    "retarget": "re-perceive the part and put it back on its target",
    "replan_keepout": "add the unexpected object as a keep-out and re-plan the path around it",
    "reperceive": "observe again before going on",
    "stop": "stop and ask the operator",
}
# the interaction-state phases and the world relations a diagnose pattern may name (the
# world model, cellspec/world/db.py, stores exactly these)
PHASES = ("idle", "approaching", "grasping", "holding", "transporting", "placing",
          "releasing")
RELATIONS = ("on", "inside", "near", "holding")
DIAG_PREDS: dict[str, tuple[str, ...]] = {
    "missing": ("rel", "obj", "obj"), "unexpected": ("rel", "obj", "obj"),
    "cs": ("phase", "phase"), "new": ("obj",), "lost": ("obj",), "in_path": ("obj",),
    "target": ("obj",), "event": ("event",), "drift": ("obj",),
}


# -- building from the parse tree ------------------------------------------------------
class _TreeBuilder:
    """Turns a textX expression into a term tree, checking the vocabulary of its kind."""

    def __init__(self, b: CellBuilder, kind: str, scale: Fraction, surfaces: set[str]):
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


def _at(b: CellBuilder, loc: tuple[int, int], msg: str) -> None:
    b.err_at(loc[0], loc[1], msg)


def _check_commit(b: CellBuilder, t: Any, forces: set[str], top: bool = True) -> bool:
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
            _at(b, t[2], unknown("measure", t[1], MEASURES, "measures"))
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
            _at(b, lhs[2], unknown("measure", lhs[1], MEASURES, "measures"))
            return False
        if lhs[0] != "ref" or MEASURES[lhs[1]][0] == "flag":
            _at(b, t[4], "a comparison needs a numeric measure on the left "
                f"({', '.join(m for m, v in MEASURES.items() if v[0] != 'flag')})")
            return False
        if rhs[0] == "ref" and rhs[1] not in forces:
            _at(b, rhs[2], unknown("threshold", rhs[1], FORCES, "the force thresholds"))
            return False
        if rhs[0] == "ref" and MEASURES[lhs[1]][0] != "force":
            _at(b, rhs[2], f"'{lhs[1]}' is not a force: compare it with a number")
            return False
        if rhs[0] not in ("num", "ref"):
            _at(b, t[4], "compare a measure with a number or a force threshold")
            return False
        return True
    return False


def disjuncts(t: Any) -> list[Any]:
    """The alternatives of a top-level ``or`` (the term itself when there is none)."""
    return list(t[1]) if t is not None and t[0] == "or" else [t]


def literals(t: Any) -> list[Any]:
    """The conjuncts of an ``and`` (the term itself when it is no conjunction)."""
    return list(t[1]) if t is not None and t[0] == "and" else [t]


def _check_diag(b: CellBuilder, t: Any, params: tuple[str, ...], surfaces: set[str],
                at: tuple[int, int]) -> bool:
    """Vocabulary and variable safety of a diagnose body; a problem with no location of its
    own (a term of constants) is reported at ``at``, the diagnose statement."""
    ok = True
    for d in disjuncts(t):
        bound: set[str] = set()
        used: list[tuple[str, tuple[int, int]]] = []
        for lit in literals(d):
            neg = False
            if lit is not None and lit[0] == "not":
                neg, lit = True, lit[1]
            if lit is None:
                return False
            if lit[0] in ("and", "or", "not"):
                _at(b, _first_loc(lit) or at, "a diagnose pattern is a conjunction of "
                    "literals (use `or` only at the top level)")
                ok = False
                continue
            if lit[0] == "call":
                name, args, loc = lit[1], lit[2], lit[3]
                sig = DIAG_PREDS.get(name)
                if sig is None or name == "drift":
                    pats = [p for p in DIAG_PREDS if p != "drift"]
                    _at(b, loc, f"unknown pattern '{name}'{did_you_mean(name, pats)} "
                        f"(patterns: {', '.join(pats)}, drift(x) > D)")
                    ok = False
                    continue
                if len(args) != len(sig):
                    _at(b, loc, f"{name} takes {len(sig)} arguments")
                    ok = False
                    continue
                for a, kind in zip(args, sig, strict=True):
                    if kind == "rel" and a not in RELATIONS + ("_",):
                        _at(b, loc, unknown("relation", a, RELATIONS, "relations"))
                        ok = False
                    elif kind == "phase" and a not in PHASES + ("_",):
                        _at(b, loc, unknown("phase", a, PHASES, "phases"))
                        ok = False
                    elif kind == "event" and a not in EVENTS + ("_",):
                        _at(b, loc, unknown("event", a, EVENTS, "events"))
                        ok = False
                    elif kind == "obj" and is_var(a, surfaces):
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
                    if is_var(lhs[2][0], surfaces):
                        bound.add(lhs[2][0])
                    continue
                if lhs is not None and rhs is not None and lhs[0] == rhs[0] == "ref" \
                        and lit[1] in ("==", "!="):
                    for r in (lhs, rhs):
                        if is_var(r[1], surfaces):
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
            _at(b, _first_loc(lit) or at, "not a diagnose pattern")
            ok = False
        for v, loc in used:
            if v not in bound:
                _at(b, loc, f"variable '{v}' must appear in a positive pattern first "
                    "(e.g. target(x), missing(on, x, _))")
                ok = False
        for p in params:
            if p not in bound:
                _at(b, _first_loc(d) or at, f"parameter '{p}' is not bound by every "
                    "alternative of the pattern")
                ok = False
    return ok


def is_var(a: str, surfaces: set[str]) -> bool:
    """Whether a name in an object position is a variable (not ``_``, ``gripper``, a surface)."""
    return a not in ("_", "gripper") and a not in surfaces


def _first_loc(t: Any) -> tuple[int, int] | None:
    if isinstance(t, tuple):
        for x in t:
            if isinstance(x, tuple) and len(x) == 2 and all(isinstance(v, int) for v in x):
                return x
            r = _first_loc(x)
            if r:
                return r
    return None


def build_world(b: CellBuilder, cell_file: SourceFile, cell_st: Any) -> WorldSpec:
    """Force thresholds of the cell and the commit/diagnose rules of every loaded file.

    A rule of a later file (the importer) overrides one of the same name (action kind or
    cause) from an earlier file (an import, e.g. the standard diagnosis library)."""
    with b.in_file(cell_file):
        forces = _forces(b, cell_st.items)
    surfaces = {st.name for st in cell_st.items if type(st).__name__ == "Surface"}
    surfaces.add("table")
    commits: dict[str, WorldRule] = {}
    diags: dict[str, WorldRule] = {}
    for f in b.loaded():
        with b.in_file(f):
            _file_rules(b, f, surfaces, commits, diags)
    return WorldSpec(forces=forces, commits=tuple(commits.values()),
                     diagnoses=tuple(diags.values()))


def _forces(b: CellBuilder, items: Iterable[Any]) -> dict[str, ForceThreshold]:
    """The cell's `force NAME VALUE [for SECONDS]` items, checked."""
    forces: dict[str, ForceThreshold] = {}
    for item in items:
        if type(item).__name__ != "Force":
            continue
        if item.name not in FORCES:
            b.err(item, unknown("force threshold", item.name, FORCES, "thresholds"))
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
    return forces


def _file_rules(b: CellBuilder, f: SourceFile, surfaces: set[str],
                commits: dict[str, WorldRule], diags: dict[str, WorldRule]) -> None:
    """The commit and diagnose statements of one loaded file, into ``commits``/``diags``."""
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
                b.err(st, unknown("action kind", st.action, ACTIONS, "actions"))
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
                b.err(st, unknown("recovery", st.recovery, RECOVERIES, "recoveries"))
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
            s = b.src(st)
            if not tb.ok or not _check_diag(b, body, params, surfaces, (s.line, s.col)):
                continue
            diags[name] = WorldRule(kind="diagnose", name=name, message=msg,
                                    params=params, recovery=st.recovery,
                                    priority=int(pr), body=_scale(body, f.scale),
                                    source=src)


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



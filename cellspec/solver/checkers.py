"""One ``Checker`` protocol for the verification backends, and their registry: clingo
(``solver/asp``), the numpy reference (``solver/reference.py``) and Z3 (``solver/smt``).

``verify.check`` dispatches through :func:`get`; a backend first says which rules it
cannot decide exactly (:meth:`Checker.supported`: refusals naming rule and feature), and a
refused rule makes the verdict ``unknown`` (reason ``unsupported``), never ``pass``.
``python -m cellspec.solver.checkers --markdown`` prints the capability table of
docs/backends.md from :data:`REGISTRY` (a test keeps the committed file equal to it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cellspec.core import ir
from cellspec.core.errors import CellspecError
from cellspec.core.status import SENTENCES, BackendStatus, Reason
from cellspec.dsl.model import Rule
from cellspec.solver import reference as ref
from cellspec.solver.asp import backend as asp
from cellspec.solver.asp.compile import CompiledProgram, compile_rules
from cellspec.solver.instance import Instance
from cellspec.solver.smt import backend as smt
from cellspec.solver.smt.ground import GroundingLimit

# what a rule can use besides relations (each decided exactly or refused by name)
FEATURES: tuple[str, ...] = ("forall", "exists", "count", "linear arithmetic", "type",
                             "gripper")
RELATIONS: tuple[str, ...] = tuple(ir.RELATIONS)


@dataclass(frozen=True)
class Refusal:
    """A rule a backend cannot decide exactly: which rule, which feature, where it is."""

    rule: str
    feature: str  # e.g. "relation stable"
    source: str

    def sentence(self) -> str:
        """``rule 'stability' (file:line:col) uses relation stable`` (for the notes)."""
        return f"rule '{self.rule}' ({self.source}) uses {self.feature}"


@dataclass(frozen=True)
class CheckerResult:
    """A backend's raw answer: ``done`` with the violated (rule index, binding) pairs, or
    ``unknown`` with a :class:`Reason` and the human sentence."""

    status: BackendStatus
    violations: tuple[tuple[int, tuple], ...] = ()
    reason: str | None = None
    reason_code: Reason | None = None

    def __post_init__(self) -> None:
        if self.status not in tuple(BackendStatus):
            raise ValueError(f"checker status must be done or unknown, not {self.status!r}")
        if self.status == BackendStatus.UNKNOWN and not (self.reason and self.reason_code):
            raise ValueError("an unknown checker result needs a reason and its code")
        if self.status == BackendStatus.DONE and self.reason_code is not None:
            raise ValueError("a decided checker result carries no reason code")


@runtime_checkable
class Checker(Protocol):
    """What every verification backend offers (CPMpy's ``SolverInterface``, smaller)."""

    name: str
    description: str
    capabilities: frozenset[str]  # relations and features (FEATURES) it decides exactly

    def supported(self, rules: Sequence[Rule]) -> list[Refusal]:
        """The rules it cannot decide exactly (empty: it decides them all)."""
        ...

    def violations(self, inst: Instance, rules: Sequence[Rule],
                   timeout: float | None = None) -> CheckerResult:
        """Every violated (rule index, binding) of ``rules`` on ``inst``, or unknown."""
        ...


def features_of(rule: Rule) -> list[str]:
    """The relations (``relation NAME``) and features a rule's body uses, in first use."""
    out: dict[str, None] = {}
    for n in ir.walk(rule.body):
        if isinstance(n, ir.Rel):
            out[f"relation {n.name}"] = None
        elif isinstance(n, ir.Quant):
            out[n.kind] = None
        elif isinstance(n, ir.CountCmp):
            out["count"] = None
        elif isinstance(n, ir.Cmp):
            out["linear arithmetic"] = None
        elif isinstance(n, ir.SymEq):
            out[n.attr] = None
        elif not isinstance(n, ir.BoolConst | ir.Not | ir.And | ir.Or):
            out[type(n).__name__] = None  # a node no backend declares: refused by name
    return list(out)


def refusals(capabilities: frozenset[str], rules: Iterable[Rule]) -> list[Refusal]:
    """Every (rule, feature) outside ``capabilities``, in rule order."""
    out = []
    for r in rules:
        for f in features_of(r):
            key = f.removeprefix("relation ")
            if key not in capabilities:
                out.append(Refusal(rule=r.name, feature=f, source=str(r.source)))
    return out


def order_rules(rules: Iterable[Rule], has_order: bool) -> tuple[list[Rule], list[str]]:
    """(rules to check, names skipped): the rules that read the placement order
    (``ir.ORDER_RELATIONS``) are checked only when the layout has an order."""
    rules = list(rules)
    if has_order:
        return rules, []
    skipped = [r.name for r in rules if ir.uses_relation(r.body, ir.ORDER_RELATIONS)]
    return [r for r in rules if r.name not in skipped], skipped


def _unknown(reason: str, code: Reason) -> CheckerResult:
    return CheckerResult(BackendStatus.UNKNOWN, reason=reason, reason_code=code)


# --- clingo ------------------------------------------------------------------------------

_COMPILED: dict[tuple, CompiledProgram] = {}


def compiled(rules: tuple[Rule, ...], inst: Instance) -> CompiledProgram:
    """The ASP program of ``rules`` for this instance's tolerances, cached (keyed by the
    rules themselves, frozen and hashable, never by object identity)."""
    key = (rules, inst.eps, inst.opening, inst.default_gripper)
    prog = _COMPILED.get(key)
    if prog is None:
        prog = compile_rules(rules, inst.eps, inst.opening, inst.default_gripper)
        if len(_COMPILED) > 64:
            _COMPILED.clear()
        _COMPILED[key] = prog
    return prog


def _importable(module: str) -> bool:
    try:
        __import__(module)  # lazy: only to ask whether the solver is installed
    except ImportError:
        return False
    return True


class ClingoChecker:
    """clingo: every rule compiled to ASP, pair relations decided in numpy on the
    broad-phase candidates (the default backend; scales to 10^5 parts)."""

    name = "clingo"
    description = "clingo (ASP), fed candidate pairs by a numpy broad phase (default)"
    capabilities = frozenset({*RELATIONS, *FEATURES})
    shapes = True  # yawed boxes and cylinders: kernel-decided atoms (docs/shapes.md)

    def supported(self, rules: Sequence[Rule]) -> list[Refusal]:
        """Nothing is refused while clingo can be imported."""
        if not _importable("clingo"):
            return [Refusal(r.name, "clingo (not installed)", str(r.source)) for r in rules]
        return refusals(self.capabilities, rules)

    def violations(self, inst: Instance, rules: Sequence[Rule],
                   timeout: float | None = None) -> CheckerResult:
        """Ground and solve; limits come back as unknown with their reason."""
        rules = tuple(rules)
        res = asp.run(inst, compiled(rules, inst), list(range(len(rules))), timeout=timeout)
        if res.status != BackendStatus.DONE:
            code = res.reason_code or Reason.INTERNAL_ERROR  # every limit of run() names one
            return _unknown(res.reason or SENTENCES[code], code)
        return CheckerResult(BackendStatus.DONE, tuple(res.violations))


# --- reference ---------------------------------------------------------------------------

class ReferenceChecker:
    """The numpy reference: the meaning of every rule by brute force over every binding
    (the differential tests' oracle; dense, for small layouts only)."""

    name = "reference"
    description = f"numpy brute force over every binding (oracle; at most {ref.MAX_PARTS} parts)"
    capabilities = frozenset({*RELATIONS, *FEATURES})
    shapes = True  # yawed boxes and cylinders: the exact shapes kernel

    def supported(self, rules: Sequence[Rule]) -> list[Refusal]:
        """The reference decides every relation and feature of the language."""
        return refusals(self.capabilities, rules)

    def violations(self, inst: Instance, rules: Sequence[Rule],
                   timeout: float | None = None) -> CheckerResult:
        """Every binding evaluated densely; CellspecError for a layout too large for it."""
        if inst.n > ref.MAX_PARTS:
            raise CellspecError(f"the reference backend evaluates every pair densely and is "
                                f"meant for small layouts (at most {ref.MAX_PARTS} parts, this "
                                f"one has {inst.n}); use the clingo backend")
        r = ref.ReferenceEvaluator(inst)
        out: list[tuple[int, tuple]] = []
        for k, rule in enumerate(rules):
            out.extend((k, b) for b in r.violations(rule))
        return CheckerResult(BackendStatus.DONE, tuple(sorted(out)))


# --- Z3 ----------------------------------------------------------------------------------

class Z3Checker:
    """Z3: every rule instance lowered to an SMT formula over the fixed boxes, its truth
    read from the model (the encoding ``--robust``, ``explain`` and ``lint`` build on)."""

    name = "z3"
    description = "Z3 (SMT, linear integer arithmetic); no stability LP"
    capabilities = frozenset(smt.FEATURES)
    shapes = True  # yawed boxes: exact linear atoms; cylinders: the kernel's constants

    def supported(self, rules: Sequence[Rule]) -> list[Refusal]:
        """Refuses the relations it does not encode (stable, placed_stable) by name."""
        if not _importable("z3"):
            return [Refusal(r.name, "z3 (not installed)", str(r.source)) for r in rules]
        return refusals(self.capabilities, rules)

    def violations(self, inst: Instance, rules: Sequence[Rule],
                   timeout: float | None = None) -> CheckerResult:
        """The violation set decided by Z3 (every instance's truth in one model)."""
        try:
            found = smt.smt_violations(inst, rules, timeout=timeout)
        except (smt.Z3Unknown, GroundingLimit) as exc:  # a time or grounding limit
            return _unknown(str(exc), exc.reason)
        return CheckerResult(BackendStatus.DONE, tuple(found))


REGISTRY: dict[str, Checker] = {c.name: c for c in (ClingoChecker(), ReferenceChecker(),
                                                     Z3Checker())}
DEFAULT = "clingo"


def get(name: str) -> Checker:
    """The registered checker called ``name``; CellspecError naming the choices."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise CellspecError(f"unknown backend {name!r} (one of: {', '.join(REGISTRY)})") \
            from None


def markdown() -> str:
    """The capability table of docs/backends.md, generated from :data:`REGISTRY`."""
    names = list(REGISTRY)
    lines = ["# Verification backends", "",
             "Generated by `python -m cellspec.solver.checkers --markdown > docs/backends.md`",
             "from `cellspec/solver/checkers.py` (a test keeps this file equal to it). Pick one",
             "with `cellspec check --backend NAME`; a backend that cannot decide a rule",
             "exactly refuses it by name and the verdict is `unknown` (reason `unsupported`),",
             "never `pass`.", "",
             "| backend | what |", "| --- | --- |"]
    lines += [f"| `{n}` | {REGISTRY[n].description} |" for n in names]
    lines += ["", "Which backend decides which relation (yes: exactly; refused: `unknown`, "
              "naming the rule):", "",
              "| relation | " + " | ".join(f"`{n}`" for n in names) + " |",
              "| --- |" + " --- |" * len(names)]
    for rel in RELATIONS:
        cells = ["yes" if rel in REGISTRY[n].capabilities else "refused" for n in names]
        lines.append(f"| `{rel}` | " + " | ".join(cells) + " |")
    lines += ["", "| feature | " + " | ".join(f"`{n}`" for n in names) + " |",
              "| --- |" + " --- |" * len(names)]
    for feat in FEATURES:
        cells = ["yes" if feat in REGISTRY[n].capabilities else "refused" for n in names]
        lines.append(f"| {feat} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m cellspec.solver.checkers --markdown``: print the capability table."""
    p = argparse.ArgumentParser(prog="python -m cellspec.solver.checkers",
                                description="The verification backends and what they decide.")
    p.add_argument("--markdown", action="store_true", help="the docs/backends.md table")
    a = p.parse_args(argv)
    if a.markdown:
        sys.stdout.write(markdown())
    else:
        for n, c in REGISTRY.items():
            print(f"{n}: {c.description}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

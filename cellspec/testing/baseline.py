"""``cellspec test --baseline GITREF``: every cell file of the test run whose text, or the
text of a file it imports, differs from GITREF is compared with its GITREF version by
``cellspec diff``, rule by rule; a rule that got looser (or was removed, or went down in
severity), or a whole file that accepts a layout its GITREF version rejects, fails the run
unless the file says so with a ``// loosens: RULE`` marker or ``--allow-looser`` is given.
docs/diff.md."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from cellspec.core.errors import CellspecError, DiagnosticSink
from cellspec.core.severity import Severity
from cellspec.dsl.build import CellBuilder
from cellspec.dsl.gitref import GitTree, texts_at, texts_now
from cellspec.dsl.load import display_path, parse_text, read_rule_file
from cellspec.dsl.parser import load_cell
from cellspec.solver.formal.diff import (
    DEFAULT_PARTS,
    WHOLE,
    DiffRelation,
    DiffReport,
    RuleDiff,
    diff,
    where,
)

MARKER = re.compile(r"//\s*loosens\s*:\s*([^\n]*)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RANK = {Severity.ERROR: 2, Severity.WARNING: 1, Severity.PREFERENCE: 0}  # down: looser
DEFAULT_SECONDS = 60.0  # per changed file, when the run gives no --timeout
_LOOSER = (DiffRelation.LOOSER, DiffRelation.INCOMPARABLE)  # accepts a layout it used to reject


class Gate(StrEnum):
    """The baseline gate's word on one finding (see :class:`BaselineFinding`)."""

    OK = "ok"
    ALLOWED = "allowed"
    FAIL = "fail"
    UNKNOWN = "unknown"


class FileOutcome(StrEnum):
    """What the baseline decided about one cell file (see :class:`FileBaseline`)."""

    PASSED = "passed"
    FAILED = "failed"
    UNKNOWN = "unknown"
    NEW = "new"
    LIBRARY = "library"
    NOT_COMPARABLE = "not comparable"


@dataclass
class BaselineFinding:
    """What one rule (``*``: the whole file) did relative to GITREF, and the gate's word:
    ``ok`` (stricter, same meaning, added), ``allowed`` (a looser change the file or the flag
    declares), ``fail`` (a looser change not declared) or ``unknown`` (not decided)."""

    rule: str
    change: str
    gate: Gate
    text: str  # the human line, with the re-checked witness where there is one
    witness: dict | None = None

    def to_json(self) -> dict[str, Any]:
        """The finding in the ``baseline`` object of ``cellspec test --format json``."""
        return {"rule": self.rule, "change": self.change, "gate": self.gate,
                "message": self.text, "witness": self.witness}


@dataclass
class FileBaseline:
    """One cell file of the run against GITREF. ``outcome``: passed, failed, unknown (not
    decided), new (not in GITREF), library (a rule file without a cell, changed) or not
    comparable (its GITREF version does not load)."""

    file: str
    outcome: FileOutcome
    relation: DiffRelation | None = None
    findings: list[BaselineFinding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The file's entry in the ``baseline`` object."""
        return {"file": self.file, "outcome": self.outcome, "relation": self.relation,
                "findings": [f.to_json() for f in self.findings], "notes": self.notes,
                "seconds": round(self.seconds, 4)}


@dataclass
class Baseline:
    """Every cell file of the run against GITREF."""

    ref: str
    parts: int
    files: list[FileBaseline]
    unchanged: int
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """A looser change no marker or flag declares."""
        return any(f.outcome == FileOutcome.FAILED for f in self.files)

    @property
    def unknown(self) -> bool:
        """A change that could not be decided (not proved not looser)."""
        return any(f.outcome == FileOutcome.UNKNOWN for f in self.files)

    def to_json(self) -> dict[str, Any]:
        """The ``baseline`` object of ``cellspec test --format json``."""
        return {"ref": self.ref, "parts": self.parts, "unchanged": self.unchanged,
                "files": [f.to_json() for f in self.files], "notes": self.notes}


def markers(texts: list[str]) -> set[str]:
    """The rule names of every ``// loosens: a, b`` marker in the texts."""
    out: set[str] = set()
    for t in texts:
        for m in MARKER.finditer(t):
            out.update(_NAME.findall(m.group(1)))
    return out


def check_ref(ref: str, paths: list[str]) -> None:
    """CellspecError (exit 2) unless every path is in a git checkout where ``ref`` names a
    commit: said before any test runs."""
    for p in paths:
        GitTree(ref, Path(p))


def run_baseline(files: list[Path], ref: str, *, allow_looser: bool = False,
                 parts: int = DEFAULT_PARTS, seconds: float | None = None) -> Baseline:
    """Compare every cell file (and what it imports) with GITREF; see the module doc."""
    trees: dict[Path, GitTree] = {}
    out: list[FileBaseline] = []
    unchanged = 0
    importers: dict[Path, list[str]] = {}
    libraries: list[tuple[Path, str]] = []
    for f in files:
        parent = f.resolve().parent
        if parent not in trees:  # one tree (and one cache of texts) per checkout
            t = GitTree(ref, f)
            trees[parent] = next((u for u in trees.values() if u.top == t.top), t)
        tree = trees[parent]
        got = _one(f, tree, allow_looser, parts, seconds or DEFAULT_SECONDS, importers,
                   libraries)
        if got is None:
            unchanged += 1
        else:
            out.append(got)
    for key, shown in libraries:
        who = sorted(set(importers.get(key, [])))
        out.append(FileBaseline(shown, FileOutcome.LIBRARY, notes=[
            f"a rule file without a cell, changed since {ref}: compared through the cells "
            "of this run that import it: " + ", ".join(who) if who else
            f"a rule file without a cell, changed since {ref}: NOT compared, no cell of "
            "this run imports it"]))
    outside = sorted({o for t in trees.values() for o in t.outside})
    notes = [f"outside the git checkout, read from the disk for the {ref} versions too: "
             f"{', '.join(outside)}"] if outside else []
    return Baseline(ref, parts, out, unchanged, notes)


def _one(f: Path, tree: GitTree, allow: bool, parts: int, seconds: float,
         importers: dict[Path, list[str]], libraries: list[tuple[Path, str]]
         ) -> FileBaseline | None:
    """One file's comparison, or None when it and its imports are as at GITREF."""
    shown = display_path(f)
    try:
        text = read_rule_file(f)
        model = parse_text(text, shown)
        now = texts_now(f)
    except CellspecError:
        return None  # the test run reports it
    kinds = {type(s).__name__ for s in model.statements}
    key = f.resolve()
    if tree.rel(f) is None:
        return FileBaseline(shown, FileOutcome.UNKNOWN, notes=[
            f"outside the git checkout {tree.top}: not compared with {tree.ref}"])
    old_text = tree.text(key)
    if old_text is None:
        return FileBaseline(shown, FileOutcome.NEW, notes=[f"new: not in {tree.ref}"])
    if "Cell" not in kinds and "Test" not in kinds:
        if old_text != text:
            libraries.append((key, shown))
        return None
    for k in now:
        if k != key:
            importers.setdefault(k, []).append(shown)
    t0 = time.perf_counter()
    try:
        files, order = texts_at(f, tree)
        if {k: sf.text for k, sf in files.items()} == now:
            return None
        old = CellBuilder(files, order, DiagnosticSink()).build(main_key=key)
    except CellspecError as exc:
        return FileBaseline(shown, FileOutcome.NOT_COMPARABLE, notes=[
            f"not comparable: at {tree.ref} it does not load ({exc.diagnostics[0]})"])
    try:
        new = load_cell(f)
    except CellspecError:
        return None  # the test run reports it
    try:
        rep = diff(old, new, parts, timeout=seconds)
    except CellspecError as exc:  # e.g. no box part type to place
        why = f"not compared with {tree.ref}: {exc.diagnostics[0].message}"
        return FileBaseline(shown, FileOutcome.PASSED if allow else FileOutcome.UNKNOWN, notes=[
            why + ("" if allow else "; not proved not looser (--allow-looser accepts it)")],
            seconds=time.perf_counter() - t0)
    declared = markers(list(now.values()))
    fb = FileBaseline(shown, FileOutcome.PASSED, relation=rep.relation,
                      notes=[n for n in rep.notes if not n.startswith("identical in both")],
                      findings=_findings(rep, tree.ref, declared, allow))
    names = {d.rule for d in rep.rules}
    stray = sorted(declared - names)
    if stray:
        fb.notes.append("`// loosens:` names no rule of either version: " + ", ".join(stray))
    gates = {x.gate for x in fb.findings}
    fb.outcome = (FileOutcome.UNKNOWN if Gate.UNKNOWN in gates else FileOutcome.FAILED
                  if Gate.FAIL in gates else FileOutcome.PASSED)
    fb.seconds = time.perf_counter() - t0
    return fb


def _findings(rep: DiffReport, ref: str, declared: set[str], allow: bool) -> list[BaselineFinding]:
    out: list[BaselineFinding] = []
    for d in rep.rules:
        f = _rule_finding(d, ref, declared, allow, rep.whole)
        if f is not None:
            out.append(f)
    w = rep.whole
    loosened = any(x.gate in (Gate.FAIL, Gate.ALLOWED) for x in out)
    if w.relation in _LOOSER and not loosened:
        wit = w.new_only.witness
        out.append(BaselineFinding(WHOLE, w.relation, Gate.ALLOWED if allow else Gate.FAIL,
                           f"the whole file accepts a layout {ref} rejects: "
                           f"{_shows(wit, w.new_only.message, ref)}"
                           + ("" if allow else "; pass --allow-looser if that is meant"), wit))
    elif w.relation == DiffRelation.UNKNOWN and not any(x.gate == Gate.UNKNOWN for x in out):
        gate = Gate.ALLOWED if allow else Gate.UNKNOWN
        out.append(BaselineFinding(WHOLE, DiffRelation.UNKNOWN, gate,
                                   f"the error rules were not compared with {ref}: {w.reason}"))
    return out


def _shows(wit: dict | None, msg: str | None, ref: str, rule: str | None = None) -> str:
    """The witness in words: it passes ``rule`` (None: every error rule) now, fails at ref."""
    if wit is None:
        return "(no witness)"
    what = "the error rules" if rule is None else rule
    return (f"{where(wit)} passes {what} now, fails {'them' if rule is None else 'it'} at "
            f"{ref}" + (f": {msg}" if msg else ""))


def _rule_finding(d: RuleDiff, ref: str, declared: set[str], allow: bool, whole: RuleDiff
                  ) -> BaselineFinding | None:
    """The gate's word on one rule, or None when it is unchanged and equivalent."""
    so, sn = d.severity
    pref = so in (None, Severity.PREFERENCE) and sn in (None, Severity.PREFERENCE)
    ok = allow or d.rule in declared
    how = ("allowed by --allow-looser" if allow else f"allowed by `// loosens: {d.rule}`")
    hint = (f"; if that is meant, say so with `// loosens: {d.rule}` in the file (or pass "
            "--allow-looser)")
    wit = d.new_only.witness
    if not d.in_new:
        change, what = "removed", f"rule {d.rule} was removed since {ref}"
        if wit is not None:
            what += (f": {where(wit)} fails it at {ref}"
                     + (f": {d.new_only.message}" if d.new_only.message else ""))
    elif d.in_old and _RANK[sn or Severity.ERROR] < _RANK[so or Severity.ERROR]:
        change, what = f"severity {so} -> {sn}", f"rule {d.rule} went from {so} to {sn}"
        if whole.new_only.witness is not None and whole.new_only.message and \
                whole.new_only.message.startswith(f"{d.rule}("):
            wit = whole.new_only.witness
            what += f": {_shows(wit, whole.new_only.message, ref)}"
        else:
            what += " (the layouts that fail it no longer fail the check)"
    elif d.relation in _LOOSER:
        change = d.relation
        how_far = (f"looser than at {ref}" if d.relation == DiffRelation.LOOSER else
                   f"incomparable with {ref} (looser on some layouts, stricter on others)")
        what = f"rule {d.rule} is {how_far}: {_shows(wit, d.new_only.message, ref, d.rule)}"
    elif d.relation == DiffRelation.UNKNOWN:
        if not d.changed and d.reason is None:
            return None
        change = DiffRelation.UNKNOWN
        what = f"rule {d.rule} was not compared with {ref}: {d.reason}"
        if pref:
            return BaselineFinding(d.rule, change, Gate.OK, what + " (a preference: never gated)")
        return BaselineFinding(d.rule, change, Gate.ALLOWED if ok else Gate.UNKNOWN,
                       what + (f" ({how})" if ok else "; not proved not looser" + hint))
    else:
        if not d.changed:
            return None
        rel = ("new rule" if not d.in_old else "stricter" if d.relation == DiffRelation.STRICTER
               else "same meaning")
        return BaselineFinding(d.rule, "added" if not d.in_old else d.relation, Gate.OK,
                       f"rule {d.rule}: {rel}" + (f" than at {ref}" if rel == "stricter"
                                                  else f" as at {ref}" if d.in_old else ""),
                       d.old_only.witness)
    if pref:
        return BaselineFinding(d.rule, change, Gate.OK, what + " (a preference: never gated)", wit)
    return BaselineFinding(d.rule, change, Gate.ALLOWED if ok else Gate.FAIL,
                   what + (f" ({how})" if ok else hint), wit)


def with_junit(xml: str, b: Baseline) -> str:
    """The run's JUnit XML with one more testsuite, ``baseline GITREF``: a testcase per
    changed file, a failure for a looser change, an error for an undecided one."""
    import xml.etree.ElementTree as ET  # lazy: only with --junit-xml

    root = ET.fromstring(xml)
    fails = sum(f.outcome == FileOutcome.FAILED for f in b.files)
    errs = sum(f.outcome == FileOutcome.UNKNOWN for f in b.files)
    suite = ET.SubElement(root, "testsuite", name=f"baseline {b.ref}", tests=str(len(b.files)),
                          failures=str(fails), errors=str(errs))
    for f in b.files:
        tc = ET.SubElement(suite, "testcase", classname="baseline", name=f.file, file=f.file,
                           time="0")
        if f.outcome in (FileOutcome.FAILED, FileOutcome.UNKNOWN):
            bad = [x.text for x in f.findings if x.gate in (Gate.FAIL, Gate.UNKNOWN)]
            el = ET.SubElement(tc, "failure" if f.outcome == FileOutcome.FAILED else "error",
                               message=bad[0] if bad else f.outcome)
            el.text = "\n".join(bad)
    for k in ("tests", "failures", "errors"):
        root.set(k, str(int(root.get(k, "0")) + int(suite.get(k, "0"))))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def pretty(b: Baseline) -> str:
    """The human report of the comparison, one block per changed file."""
    lines = [f"baseline {b.ref} (layouts of 1 to {b.parts} parts):"]
    for f in b.files:
        head = {FileOutcome.PASSED: "ok", FileOutcome.FAILED: "FAIL",
                FileOutcome.UNKNOWN: "UNKNOWN", FileOutcome.NEW: "new",
                FileOutcome.LIBRARY: "library",
                FileOutcome.NOT_COMPARABLE: "not comparable"}[f.outcome]
        rel = ({DiffRelation.STRICTER: f": stricter than {b.ref}",
                DiffRelation.LOOSER: f": looser than {b.ref}",
                DiffRelation.INCOMPARABLE: f": incomparable with {b.ref} (looser on some "
                "layouts, stricter on others)",
                DiffRelation.EQUIVALENT: f": same meaning as {b.ref}",
                DiffRelation.UNKNOWN: f": not decided against {b.ref}"}.get(f.relation, "")
               if f.relation is not None else "")
        lines.append(f"  {head} {f.file}{rel}")
        for x in f.findings:
            lines.append(f"      {x.text}")
        for n in f.notes:
            lines.append(f"      note: {n}")
    counts: dict[FileOutcome, int] = {}
    for f in b.files:
        counts[f.outcome] = counts.get(f.outcome, 0) + 1
    for n in b.notes:
        lines.append(f"  note: {n}")
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    lines.append(f"baseline {b.ref}: {len(b.files)} changed"
                 + (f" ({summary})" if summary else "") + f", {b.unchanged} unchanged")
    return "\n".join(lines) + "\n"

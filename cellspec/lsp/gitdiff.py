"""The editor's "stricter than HEAD" hints: ``cellspec diff --against HEAD FILE`` on the file
as saved, in a child process with a time limit (off the keystroke path: run on open and on
save only, and only in a git checkout where some tracked file differs from HEAD), turned into
one line per changed rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from cellspec.core.errors import CellspecError
from cellspec.core.proc import preexec_die_with_parent
from cellspec.dsl.gitref import GitTree, run_git
from cellspec.solver.formal.diff import DiffRelation, where

DIFF_SECONDS = 10.0  # the diff's own --time-limit; the child is killed at twice that
REF = "HEAD"


@dataclass(frozen=True)
class Hint:
    """One line for a rule of the open file (``rule`` None: for the file, at its cell)."""

    rule: str | None
    message: str


def _words(layout: dict | None) -> str:
    return where(layout) if layout else ""


def worth_it(path: str) -> bool:
    """Is ``path`` a file of a git checkout, committed at HEAD, with some tracked file of
    the checkout changed since (else there is nothing to show)?"""
    p = Path(path)
    if not p.is_file():
        return False
    try:
        tree = GitTree(REF, p)
        if tree.text(p.resolve()) is None:
            return False  # new since HEAD: nothing to compare with
        r = run_git(tree.top, "diff", "--quiet", REF, "--")
    except CellspecError:
        return False
    return r.returncode == 1


def compute(path: str, seconds: float = DIFF_SECONDS) -> list[Hint]:
    """The hints for the saved file at ``path`` (empty when it cannot be compared: not in
    a checkout, new, unchanged, or the diff said bad input; a limit hit is one hint)."""
    if not worth_it(path):
        return []
    cmd = [sys.executable, "-m", "cellspec", "diff", "--against", REF, path, "--format",
           "json", "--time-limit", f"{seconds:g}"]
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=2 * seconds + 10, check=False,
                           env={**os.environ, "CELLSPEC_DEBUG": ""},
                           cwd=str(Path(path).parent), stdin=subprocess.DEVNULL,
                           preexec_fn=preexec_die_with_parent)
    except subprocess.TimeoutExpired:
        return [Hint(None, f"not compared with {REF}: the diff took longer than "
                     f"{2 * seconds + 10:g} s")]
    except OSError:
        return []
    try:
        obj = json.loads(r.stdout)
    except ValueError:
        return []  # bad input (the file does not load, or has no cell): diagnostics say why
    return hints(obj)


def hints(obj: dict) -> list[Hint]:
    """The hints of one ``cellspec.diff/1`` answer: every changed rule, and every rule whose
    meaning changed with the cell's constants."""
    n = obj.get("parts", 0)
    up = f" (layouts of up to {n} parts)"
    out: list[Hint] = []
    for d in obj.get("rules", []):
        rel, name = d["relation"], d["rule"]
        w = d.get("witnesses", {})
        msgs = d.get("messages", {})
        if not d.get("in_new", True):
            gone = "looser" if rel != DiffRelation.EQUIVALENT else "it never fired"
            out.append(Hint(None, f"rule {name} removed since {REF}: {gone}{up}"))
            continue
        if not d.get("in_old", True):
            what = {DiffRelation.STRICTER: f"new since {REF}: stricter", DiffRelation.EQUIVALENT:
                    f"new since {REF}: changes nothing"}.get(rel, f"new since {REF}: {rel}")
        elif rel == DiffRelation.STRICTER:
            what = (f"stricter than {REF}: {_words(w.get('old_only'))} passes {REF}, fails "
                    f"now {msgs.get('old_only', '')}").rstrip()
        elif rel == DiffRelation.LOOSER:
            what = (f"looser than {REF}: {_words(w.get('new_only'))} passes now, fails at "
                    f"{REF} {msgs.get('new_only', '')}").rstrip()
        elif rel == DiffRelation.INCOMPARABLE:
            what = (f"incomparable with {REF} (stricter on {_words(w.get('old_only'))}, "
                    f"looser on {_words(w.get('new_only'))})")
        elif rel == DiffRelation.EQUIVALENT:
            if not d.get("changed"):
                continue
            what = f"same meaning as {REF}"
        else:
            if not d.get("changed"):
                continue
            what = f"not compared with {REF}: {d.get('reason', 'unknown')}"
        sev = d.get("severity") or {}
        if sev.get("old") and sev.get("new") and sev["old"] != sev["new"]:
            what += f"; severity {sev['old']} -> {sev['new']} since {REF}"
        out.append(Hint(name, what + (up if rel != DiffRelation.UNKNOWN else "")))
    whole = (obj.get("whole") or {}).get("relation")
    if whole in (DiffRelation.STRICTER, DiffRelation.LOOSER, DiffRelation.INCOMPARABLE):
        word = "incomparable with" if whole == DiffRelation.INCOMPARABLE else f"{whole} than"
        out.append(Hint(None, f"the error rules as a whole: {word} {REF}{up}"))
    return out

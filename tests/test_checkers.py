"""The Checker protocol and its registry, ``check --backend``, the status vocabulary of the
verdicts, and internal errors (exit 3, never bad input)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cellspec
from cellspec.cli import main
from cellspec.commands.check import BACKENDS
from cellspec.core.status import InternalError, Reason, Status
from cellspec.solver import checkers
from cellspec.solver.asp import backend as asp_backend
from cellspec.solver.result import Verdict

ROOT = Path(__file__).resolve().parents[1]
STATION = ROOT / "rules/cells/dual_arm_station.cell"
BROKEN = ROOT / "rules/examples/tower3_broken.json"
TOWER = ROOT / "rules/examples/tower3.json"
NO_STABILITY = """\
cell c {
    workspace x [0.2, 0.7] y [0.05, 0.5] z [0, 0.3]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
    default gripper parallel opening 0.07 depth 0.02
}
rule workspace "{p} is outside the workspace" : forall p: inside(p, workspace)
rule no_overlap "{p} overlaps {q}" : forall {p, q}: not overlaps(p, q)
rule gravity "{p} rests on nothing" : forall p: grounded(p) or exists q: supports(q, p)
rule low "{p} is too high" : forall p: p.top <= 0.12
rule support_order "{q} is placed before {p}" :
    forall p, q: supports(p, q) implies before(p, q)
"""


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_registry_is_the_three_backends_and_the_cli_choices():
    assert list(checkers.REGISTRY) == ["clingo", "reference", "z3"]
    assert tuple(checkers.REGISTRY) == BACKENDS
    for c in checkers.REGISTRY.values():
        assert isinstance(c, checkers.Checker)
    with pytest.raises(cellspec.CellspecError, match="unknown backend 'cplex'"):
        checkers.get("cplex")


def test_docs_backends_md_is_generated_from_the_code():
    """docs/backends.md == `python -m cellspec.solver.checkers --markdown`."""
    assert (ROOT / "docs/backends.md").read_text(encoding="utf-8") == checkers.markdown()
    table = checkers.markdown()
    assert "| `stable` | yes | yes | refused |" in table
    assert "| `contact` | yes | yes | yes |" in table


def test_z3_refuses_the_stability_rules_by_name():
    cell = cellspec.load_cell(str(STATION))
    refused = checkers.get("z3").supported(cell.rules)
    assert {(r.rule, r.feature) for r in refused} == {
        ("stability", "relation stable"), ("stability_stages", "relation placed_stable")}
    assert checkers.get("clingo").supported(cell.rules) == []
    assert checkers.get("reference").supported(cell.rules) == []


def test_a_refused_rule_is_unknown_unsupported_never_pass(capsys):
    """tower3 passes under clingo; z3 cannot decide stability: unknown (exit 2)."""
    assert run(capsys, "check", str(STATION), str(TOWER))[0] == 0
    code, out, err = run(capsys, "check", str(STATION), str(TOWER), "--backend", "z3",
                         "--format", "json")
    v = json.loads(out)
    assert code == 2 and v["verdict"] == "unknown" and v["reason_code"] == "unsupported"
    assert v["reason"].startswith("unsupported: the z3 backend cannot decide stability, "
                                  "stability_stages exactly")
    assert v["stats"]["backend"] == "z3"


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_gives_the_same_violations(tmp_path, capsys, backend):
    """On rules every backend decides, `check --backend` names the same violations."""
    cell = tmp_path / "c.cell"
    cell.write_text(NO_STABILITY)
    code, out, _ = run(capsys, "check", str(cell), str(BROKEN), "--backend", backend,
                       "--format", "json")
    v = json.loads(out)
    assert code == 1 and v["verdict"] == "fail" and v["stats"]["backend"] == backend
    got = sorted((x["rule"], tuple(x["parts"])) for x in v["violations"])
    assert got == [("gravity", ("c2",)), ("gravity", ("c3",)), ("low", ("c3",)),
                   ("no_overlap", ("c1", "c2"))]


def test_clingo_output_is_the_default_and_unchanged(capsys):
    code, out, _ = run(capsys, "check", str(STATION), str(BROKEN), "--format", "json")
    code2, out2, _ = run(capsys, "check", str(STATION), str(BROKEN), "--backend", "clingo",
                         "--format", "json")
    a, b = json.loads(out), json.loads(out2)
    del a["stats"]["seconds"], b["stats"]["seconds"]
    assert code == code2 == 1 and a == b
    assert set(a) == {"format", "verdict", "violations", "warnings", "stats"}  # none on a fail


def test_verdict_words_are_the_status_enum():
    cell = cellspec.load_cell(str(STATION))
    v = cellspec.check(cell, cellspec.load_layout(str(BROKEN)))
    assert v.verdict is Status.FAIL and v.reason_code is None
    with pytest.raises(ValueError, match="pass, fail or unknown"):
        Verdict(verdict="proved")
    with pytest.raises(ValueError, match="only an unknown verdict carries a reason code"):
        Verdict(verdict="pass", reason_code=Reason.TIME_LIMIT)


def test_a_time_limit_names_its_reason_code(monkeypatch):
    """clingo stopped by its timeout: unknown with Reason.TIME_LIMIT beside the sentence."""
    cell = cellspec.load_cell(str(STATION))
    layout = cellspec.load_layout(str(BROKEN))

    class Slow:
        def __init__(self, handle):
            self.h = handle

        def __enter__(self):
            self.h.__enter__()
            return self

        def __exit__(self, *exc):
            return self.h.__exit__(*exc)

        def wait(self, timeout=None):
            return False  # never finished in time

        def cancel(self):
            self.h.cancel()

    import clingo

    solve = clingo.Control.solve
    monkeypatch.setattr(clingo.Control, "solve", lambda self, **kw: Slow(solve(self, **kw)))
    v = cellspec.check(cell, layout, timeout=0.5)
    assert v.verdict == "unknown" and v.reason_code is Reason.TIME_LIMIT
    assert v.reason == "clingo did not finish within 0.5 s"


def _no_model(monkeypatch):
    """Make clingo find no model (an integrity constraint that always fires): the
    'cannot happen' that used to come out as unknown, exit 2."""
    builtins = asp_backend._builtins
    monkeypatch.setattr(asp_backend, "_builtins", lambda: ":- #true.\n" + builtins())


def test_clingo_without_a_model_is_an_internal_error(monkeypatch):
    _no_model(monkeypatch)
    cell = cellspec.load_cell(str(STATION))
    with pytest.raises(InternalError, match="clingo found no model"):
        cellspec.check(cell, cellspec.load_layout(str(BROKEN)))


def test_an_internal_error_exits_3_with_one_line(monkeypatch, capsys):
    monkeypatch.delenv("CELLSPEC_DEBUG", raising=False)
    _no_model(monkeypatch)
    code, out, err = run(capsys, "check", str(STATION), str(BROKEN))
    assert code == 3 and out == ""
    assert err == ("cellspec: internal error (please report): InternalError: clingo found no "
                   "model (internal error)\n")


def test_verbose_shows_the_traceback_of_an_internal_error(monkeypatch, capsys):
    monkeypatch.delenv("CELLSPEC_DEBUG", raising=False)  # restored after the test
    _no_model(monkeypatch)
    code, _, err = run(capsys, "-v", "check", str(STATION), str(BROKEN))
    assert code == 3 and "Traceback" in err and "raise InternalError" in err


def test_order_rules_filter_once():
    cell = cellspec.load_cell(str(STATION))
    rules, skipped = checkers.order_rules(cell.rules, has_order=False)
    assert skipped == ["support_order", "grip_access", "stability_stages"]
    assert [r.name for r in rules] == [r.name for r in cell.rules if r.name not in skipped]
    assert checkers.order_rules(cell.rules, has_order=True) == (list(cell.rules), [])

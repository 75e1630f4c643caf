"""The paraphrase generator (bench/paraphrase.py) and, with hypothesis over it, the
offline parser: every generated or mangled command gives a spec the DSL accepts (with
the expected kinds for feasible ones) or a TranslateError, never another exception; the
open requests are refused; a few go through the whole orchestrator."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cellspec
from cellspec.agent.base import TranslateError, parse_spec
from cellspec.agent.nl.lexer import lexicon
from cellspec.agent.offline import OfflineAdapter, translate_offline
from cellspec.core.errors import CellspecError

ROOT = Path(__file__).resolve().parents[1]
CELL = str(ROOT / "rules" / "cells" / "dual_arm_station.cell")
_spec = importlib.util.spec_from_file_location("paraphrase_bench", ROOT / "bench" /
                                               "paraphrase.py")
P = importlib.util.module_from_spec(_spec)
sys.modules["paraphrase_bench"] = P
_spec.loader.exec_module(P)
DEV = P.load_templates(P.SPLITS["dev"], "dev")  # the held-out split is not used in tests


@pytest.fixture(scope="module")
def cell():
    return cellspec.load_cell(CELL)


def test_generator_size_split_and_determinism():
    held = P.load_templates(P.SPLITS["heldout"], "heldout")
    assert not {t.text for t in DEV} & {t.text for t in held}  # templates are split
    cases = P.generate(DEV + held)
    assert len(cases) >= 600
    assert {c.group for c in cases} == {"build", "refuse"}
    assert all(c.parts and c.kinds for c in cases if c.group == "build")
    again = P.generate(DEV + held)
    assert [c.command for c in again] == [c.command for c in cases]
    assert P.generate(DEV, seed=1) != P.generate(DEV, seed=0)


def test_template_file_errors_name_the_line(tmp_path):
    bad = tmp_path / "t.txt"
    bad.write_text("# header\nbuild | only two fields\n")
    with pytest.raises(ValueError, match=r"t.txt:2: expected"):
        P.load_templates(bad, "x")


def _check(case, cell):
    try:
        text = translate_offline(case.command, cell)
    except TranslateError:
        return None
    kinds = {s.kind for s in parse_spec(text).structures}
    return kinds


@settings(max_examples=150, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(k=st.integers(0, len(DEV) - 1), seed=st.integers(0, 10 ** 6))
def test_dev_templates_translate_to_the_expected_kinds(cell, k, seed):
    case = P.instantiate(DEV[k], random.Random(seed))
    kinds = _check(case, cell)
    if case.group == "refuse":
        assert kinds is None, case.command
    else:
        assert kinds is not None and set(case.kinds) <= kinds, case.command


WORDS = sorted({w for p in lexicon().phrases for w in p.split()}) + [
    "plattform", "towr", "über", "0", "-1", "1e9", "3.5", "(", "x", "by", "and", "\u200b"]


@settings(max_examples=300, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(k=st.integers(0, len(DEV) - 1), seed=st.integers(0, 10 ** 6),
       edits=st.lists(st.tuples(st.integers(0, 40), st.sampled_from(WORDS),
                                st.booleans()), max_size=4))
def test_mangled_commands_never_crash(cell, k, seed, edits):
    words = P.instantiate(DEV[k], random.Random(seed)).command.split()
    for pos, w, delete in edits:
        i = pos % (len(words) + 1)
        if delete and words:
            del words[min(i, len(words) - 1)]
        else:
            words.insert(i, w)
    command = " ".join(words)
    try:
        text = translate_offline(command, cell)
    except TranslateError as exc:
        assert exc.diagnostics[0].message.startswith(("cannot translate", "cannot build"))
        return
    parse_spec(text)  # whatever it writes, the DSL accepts


@pytest.mark.slow
def test_generated_commands_through_the_orchestrator(cell):
    from cellspec.agent.orchestrator import run_orchestrated

    P._CELL[:] = [cell]
    cases = P.generate(DEV, per=1)
    for case in cases[::6]:
        r = run_orchestrated(case.command, cell, OfflineAdapter()).result
        ok, why, bad = P.check_case(case, r)
        assert not bad, (case.command, why)
        assert ok, (case.command, why)


def test_a_few_generated_commands_build_and_verify(cell):
    from cellspec.agent.orchestrator import run_orchestrated

    P._CELL[:] = [cell]
    cases = [c for c in P.generate(DEV, per=1) if c.group == "build"][:40:8]
    cases += [c for c in P.generate(DEV, per=1) if c.group == "refuse"][:2]
    for case in cases:
        r = run_orchestrated(case.command, cell, OfflineAdapter()).result
        ok, why, bad = P.check_case(case, r)
        assert ok and not bad, (case.command, why)


def test_parse_errors_are_cellspec_errors(cell):
    for command in ("at at at", "by by 3", "x 1 to", "3 by", "a tower at x 0.4"):
        with pytest.raises(CellspecError):
            translate_offline(command, cell)

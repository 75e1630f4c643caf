"""Limits that were still overrun (issue 31): --robust-timeout bounds the whole proof,
`test --time-limit` the whole run (--timeout is per test), a small --max-memory is an
``unknown`` (exit 2), never a dead worker (exit 3), the summary line's time is the verb's,
and only a verb with --max-bytes suggests it."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from conftest import REPO, STATION, run_cellspec

from cellspec.cli import main

WALL = REPO / "rules" / "layouts" / "wall_9.json"
SCENARIO = REPO / "rules" / "scenarios" / "table_vi_01_workspace_boundary.cell"


def test_robust_timeout_bounds_the_whole_proof(capsys, monkeypatch):
    """A proof that does not return (its grounding, say) is stopped at the limit."""
    import cellspec.solver.formal.robust as robust

    monkeypatch.setattr(robust, "prove_robust", lambda *a, **k: time.sleep(20))
    t0 = time.monotonic()
    rc = main(["check", str(STATION), str(WALL), "--robust", "0.001", "--robust-timeout",
               "1"])
    took = time.monotonic() - t0
    out = capsys.readouterr().out
    assert rc == 2 and "not decided within 1 s (--robust-timeout bounds the whole proof" in out
    assert took < 6, took  # main: as long as the proof runs (13.8 s seen)


def _importing_cell(tmp: Path, tests: int = 4) -> Path:
    for k in range(10):  # ten imports of ~60 KiB each
        rules, i = [], 0
        while sum(map(len, rules)) < 60_000:
            rules.append(f'rule r{k}_{i} "m{i}" : forall p: p.top <= {i + 1}\n')
            i += 1
        (tmp / f"i{k}.cell").write_text("".join(rules))
    text = SCENARIO.read_text()
    head, _, block = text.partition("test structure_enters_blocked_region")
    body = "".join(f"test t{j}{block}" for j in range(tests))
    imports = "".join(f'import "i{k}.cell"\n' for k in range(10))
    f = tmp / "big.cell"
    f.write_text(imports + head + body)
    return f


def test_test_time_limit_bounds_the_whole_run(capsys, tmp_path: Path):
    cell = _importing_cell(tmp_path)
    t0 = time.monotonic()
    rc = main(["test", str(cell), "--time-limit", "1"])
    took = time.monotonic() - t0
    out = capsys.readouterr().out
    assert rc == 2, out
    assert out.startswith("unknown: time limit: the test run was not finished within 1 s")
    assert took < 5, took  # main: --time-limit was per test, 28.7 s for such a cell


def test_test_timeout_is_per_test_and_said_so(capsys):
    with pytest.raises(SystemExit):
        main(["test", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--timeout S solver time limit per test" in help_text
    assert "--time-limit S time limit of the whole run" in help_text
    assert main(["test", str(SCENARIO), "--timeout", "30", "--time-limit", "120"]) == 0
    assert "1 passed, 0 failed" in capsys.readouterr().out


@pytest.mark.parametrize("budget", ["70M", "120M", "160M", "200M"])
def test_a_small_memory_budget_is_unknown_not_a_dead_worker(capsys, budget):
    """In process (a large parent: refused before the fork) and from the command line (a
    small one: OpenBLAS exit(1) and thread stacks refused were exit 3 on main)."""
    rc = main(["check", str(STATION), str(WALL), "--max-memory", budget])
    out, err = capsys.readouterr()
    r = run_cellspec("check", STATION, WALL, "--max-memory", budget)
    for code, o, e in ((rc, out, err), (r.returncode, r.stdout, r.stderr)):
        assert "internal error" not in e and "worker process died" not in e, e
        assert code in (0, 2)
        if code == 2:
            assert f"memory limit: the run needed more than {budget[:-1]} MiB" in o


def test_summary_time_is_the_verbs(capsys):
    t0 = time.monotonic()
    assert main(["plan", str(STATION), str(WALL)]) == 0
    took = time.monotonic() - t0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    shown = float(re.search(r"\((\d+\.\d+) s\)$", last).group(1))
    assert 0.6 * took <= shown <= took + 0.05, (shown, took)


@pytest.mark.parametrize("verb", ["plan", "repair", "explain", "review", "sim"])
def test_only_verbs_with_max_bytes_suggest_it(capsys, tmp_path: Path, verb):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (32 * 1024 * 1024 + 1))
    rc = main([verb, str(STATION), str(big)])
    err = capsys.readouterr().err
    assert rc == 2 and "the limit of a layout file" in err and "--max-bytes" not in err, err


def test_check_still_suggests_its_max_bytes(capsys, tmp_path: Path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2000)
    assert main(["check", str(STATION), str(big), "--max-bytes", "1000"]) == 2
    assert "(raise it with --max-bytes)" in capsys.readouterr().err

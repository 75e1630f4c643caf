"""One run per world database (issue 31): two `cellspec run` on one new database could both
commit (the second accepted the database the first had just created, its history still
empty). A run claims the database atomically before any setup; the loser exits 2 naming it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import REPO, STATION

from cellspec.core.errors import CellspecError
from cellspec.dsl.parser import load_cell
from cellspec.world import run as wrun
from cellspec.world.db import open_world

LAYOUT = REPO / "rules" / "world" / "tower_row.json"


@pytest.fixture(scope="module")
def cell():
    return load_cell(STATION)


def test_a_claimed_database_is_refused_before_its_first_history_row(cell, tmp_path: Path):
    db = tmp_path / "w.db"
    first, created, _, _ = wrun._open_world(cell, db)  # run 1: created, still setting up
    try:
        assert created and first.meta("run")
        with pytest.raises(CellspecError) as exc:
            wrun._open_world(cell, db)  # run 2 on the same database
        msg = str(exc.value)
        assert str(db) in msg and "already holds a run" in msg
    finally:
        first.close()


def test_an_unclaimed_empty_database_is_claimed_once(cell, tmp_path: Path):
    db = tmp_path / "w.db"
    open_world(db, create=True, cell=cell.name).close()  # made by hand: no run yet
    w, created, _, _ = wrun._open_world(cell, db)
    try:
        assert not created
        with pytest.raises(CellspecError, match="already holds a run"):
            wrun._open_world(cell, db)
        w.release_run()  # a run that ended before writing anything gives it back
        again, _, _, _ = wrun._open_world(cell, db)
        again.close()
    finally:
        w.close()


@pytest.mark.parametrize("pre_created", [False, True])
def test_racing_opens_exactly_one_wins(cell, tmp_path: Path, pre_created: bool):
    """Two threads (separate connections) open one database at the same moment, 15 times."""
    for trial in range(15):
        db = tmp_path / f"w{trial}.db"
        if pre_created:
            open_world(db, create=True, cell=cell.name).close()
        go = threading.Barrier(2, timeout=30)
        won: list[str] = []
        lost: list[str] = []

        def contender(db: Path = db, go: threading.Barrier = go, won: list[str] = won,
                      lost: list[str] = lost) -> None:
            go.wait()
            try:
                w = wrun._open_world(cell, db)[0]
            except CellspecError as exc:
                lost.append(str(exc))
                go.wait()
                return
            won.append(w.path)
            go.wait()  # hold the claim until the other one has tried
            w.close()

        ts = [threading.Thread(target=contender) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        assert len(won) == 1 and len(lost) == 1, (trial, lost)
        assert str(db) in lost[0]


def _rows(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(str(db))
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.mark.slow
def test_two_cellspec_runs_on_one_new_database(tmp_path: Path):
    env_cmd = [sys.executable, "-m", "cellspec", "run", str(STATION), str(LAYOUT),
               "--engine", "gripper", "--world"]
    for trial in range(3):
        db = tmp_path / f"w{trial}.db"
        ps = [subprocess.Popen([*env_cmd, str(db)], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for _ in range(2)]
        try:
            outs = [p.communicate(timeout=120) for p in ps]
        finally:
            for p in ps:
                p.kill()
                p.wait(10)
        codes = sorted(p.returncode for p in ps)
        assert codes == [0, 2], (codes, outs)
        loser = outs[[p.returncode for p in ps].index(2)][1]
        assert str(db) in loser and "Traceback" not in loser
        assert _rows(db, "SELECT COUNT(*) FROM history WHERE action = 'init'") == [(1,)]

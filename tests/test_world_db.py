"""The world database: atomic transitions (SIGKILL), lifecycle, association, bad input."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cellspec.core.errors import CellspecError
from cellspec.world import association as assoc
from cellspec.world.db import Entity, Transition, WorldRelation, open_world
from tests.conftest import REPO

N_ENT = 6

WRITER = r"""
import sys, time, random
sys.path.insert(0, sys.argv[2])
from cellspec.world.db import Entity, WorldRelation, Transition, open_world
w = open_world(sys.argv[1])
rng = random.Random(int(sys.argv[3]))
k = sum(1 for h in w.history() if h["action"] == "t" and h["outcome"] == "committed")
print("ready", flush=True)
while True:
    k += 1
    ents = [Entity(id=f"e{i}", type="cube", pos=(k * 0.001, i * 0.1, 0.025),
                   size=(0.05, 0.05, 0.05)) for i in range(N_ENT)]
    rels = [WorldRelation("on", f"e{i}", "table") for i in range(k % N_ENT)]
    commit = rng.random() < 0.8
    def decide(c=commit):
        time.sleep(rng.random() * 0.004)  # widen the window between the writes and COMMIT
        return c
    ok = w.transition(Transition(action="t", part="*", upserts=ents, relations=rels,
                                 cs=("holding", f"e{k % N_ENT}"), detail={"k": k}), decide)
    if not ok:
        k -= 1
""".replace("N_ENT", str(N_ENT))


def _check_consistent(db: Path) -> int:
    """The database is intact and at a state some committed transition left behind."""
    con = sqlite3.connect(str(db))
    try:
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        n = con.execute("SELECT COUNT(*) FROM history WHERE action = 't' AND outcome = "
                        "'committed'").fetchone()[0]
        xs = {round(r[0] * 1000) for r in con.execute("SELECT x FROM entities")}
        nrel = con.execute("SELECT COUNT(*) FROM relations").fetchone()[0]
        cs = con.execute("SELECT object FROM cs").fetchone()[0]
    finally:
        con.close()
    if n == 0:
        assert xs == set() and nrel == 0
    else:
        assert xs == {n}, f"entities from different transitions: {xs}, history {n}"
        assert nrel == n % N_ENT
        assert cs == f"e{n % N_ENT}"
    return n


def _kill_loop(tmp_path: Path, iterations: int, seed: int) -> tuple[int, int]:
    db = tmp_path / "world.db"
    open_world(db, create=True, cell="kill").close()
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    rng = np.random.default_rng(seed)
    last, grew = 0, 0
    for it in range(iterations):
        p = subprocess.Popen([sys.executable, str(script), str(db), str(REPO), str(it)],
                             stdout=subprocess.PIPE, text=True)
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        time.sleep(float(rng.uniform(0.02, 0.12)))
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()
        n = _check_consistent(db)
        assert n >= last  # a committed transition is never lost
        grew += n > last
        last = n
    return last, grew


def test_sigkill_mid_transition_leaves_before_or_after_state(tmp_path: Path) -> None:
    last, grew = _kill_loop(tmp_path, 50, seed=1)
    assert last > 50 and grew >= 40  # the writer really was killed amid a stream of writes
    with open_world(tmp_path / "world.db") as w:  # and the file opens as a world again
        assert len(w.entities()) == N_ENT


@pytest.mark.slow
def test_sigkill_many_times(tmp_path: Path) -> None:
    last, grew = _kill_loop(tmp_path, 80, seed=2)
    assert grew >= 65


def test_transition_commits_or_rolls_back_everything(tmp_path: Path) -> None:
    with open_world(tmp_path / "w.db", create=True) as w:
        e = Entity(id="c1", type="cube", pos=(0.4, 0.2, 0.025), size=(0.05, 0.05, 0.05))
        assert w.transition(Transition("place", "c1", upserts=[e],
                                       relations=[WorldRelation("on", "c1", "table")],
                                       cs=("idle", None)))
        moved = Entity(id="c1", type="cube", pos=(0.5, 0.2, 0.025), size=(0.05, 0.05, 0.05))
        ok = w.transition(Transition("pick", "c1", upserts=[moved], relations=[],
                                     cs=("holding", "c1"), cause="x"), lambda: False)
        assert not ok
        assert w.entity("c1").pos == (0.4, 0.2, 0.025)
        assert w.relations() == [WorldRelation("on", "c1", "table")]
        assert w.cs() == ("idle", None)
        assert [h["outcome"] for h in w.history()] == ["committed", "rolled_back"]

        def boom() -> bool:
            raise RuntimeError("decide failed")

        with pytest.raises(RuntimeError):
            w.transition(Transition("pick", "c1", upserts=[moved]), boom)
        assert w.entity("c1").pos == (0.4, 0.2, 0.025)


def test_nan_pose_is_refused_and_nothing_written(tmp_path: Path) -> None:
    with open_world(tmp_path / "w.db", create=True) as w:
        bad = Entity(id="c1", type="cube", pos=(float("nan"), 0.2, 0.025),
                     size=(0.05, 0.05, 0.05))
        with pytest.raises(CellspecError, match="NaN"):
            w.transition(Transition("place", "c1", upserts=[bad]))
        assert w.entities() == [] and w.history() == []
    with pytest.raises(CellspecError, match="'pos' holds NaN"):
        assoc.parse_observation({"type": "cube", "pos": [float("nan"), 0, 0],
                                 "size": [0.05, 0.05, 0.05]}, "obs[0]")


def test_corrupt_and_foreign_files_are_refused_untouched(tmp_path: Path) -> None:
    text = tmp_path / "notes.db"
    text.write_bytes(b"just some text, not a database\n")
    with pytest.raises(CellspecError, match="not SQLite"):
        open_world(text)
    assert text.read_bytes() == b"just some text, not a database\n"
    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(str(foreign))
    con.execute("CREATE TABLE t (x)")
    con.execute("INSERT INTO t VALUES (1)")
    con.commit()
    con.close()
    before = foreign.read_bytes()
    with pytest.raises(CellspecError, match="foreign SQLite"):
        open_world(foreign)
    assert foreign.read_bytes() == before
    good = tmp_path / "good.db"
    with open_world(good, create=True) as w:
        w.record("x", "*", "committed")
    raw = bytearray(good.read_bytes())
    raw[100:4096] = b"\xff" * (4096 - 100)  # smash the schema page
    good.write_bytes(bytes(raw))
    with pytest.raises(CellspecError, match="corrupt"):
        open_world(good)
    with pytest.raises(CellspecError, match="no such world database"):
        open_world(tmp_path / "missing.db")


def test_hungarian_beats_greedy_matching() -> None:
    # greedy nearest-first would give e1 the observation at 0.10 and leave e2 far away
    ents = [Entity(id="e1", type="cube", pos=(0.0, 0, 0), size=(0.05,) * 3),
            Entity(id="e2", type="cube", pos=(0.12, 0, 0), size=(0.05,) * 3)]
    obs = [assoc.Observation("cube", (0.10, 0, 0), (0.05,) * 3),
           assoc.Observation("cube", (-0.05, 0, 0), (0.05,) * 3)]
    a = assoc.associate(ents, obs, gate=0.2)
    assert a.matches == {"e1": 1, "e2": 0}
    # type gating: a different type is never matched, however close
    a = assoc.associate(ents[:1], [assoc.Observation("bolt", (0, 0, 0), (0.05,) * 3)])
    assert a.matches == {} and a.missed == ("e1",) and a.new_obs == (0,)
    # distance gating
    a = assoc.associate(ents[:1], [assoc.Observation("cube", (0.3, 0, 0), (0.05,) * 3)], 0.2)
    assert a.matches == {}


def test_lifecycle_decay_archive_restore_and_confirmation() -> None:
    e = Entity(id="c1", type="cube", pos=(0.4, 0.2, 0.025), size=(0.05,) * 3)
    ents, cands = [e], []
    for k in range(1, 46):
        u = assoc.update(ents, [], cands)
        ents = u.entities
        assert ents[0].confidence == pytest.approx(0.95 ** k)
        if k < 45:
            assert ents[0].lifecycle == "Uncertain", k  # 0.95^44 = 0.1047 >= 0.1
        assert u.archived == (("c1",) if k == 45 else ())
    assert ents[0].lifecycle == "Archived"  # 0.95^45 = 0.0994 < 0.1
    u = assoc.update(ents, [assoc.Observation("cube", (0.41, 0.2, 0.025), (0.05,) * 3)], [])
    assert u.restored == ("c1",) and u.entities[0].lifecycle == "Active"
    assert u.entities[0].confidence == 1.0 and u.entities[0].pos == (0.41, 0.2, 0.025)
    # a new object needs 2 observations in a row before it becomes an entity
    o = assoc.Observation("obstacle", (0.3, 0.1, 0.05), (0.04, 0.04, 0.1))
    u1 = assoc.update([], [o], [])
    assert u1.created == () and len(u1.candidates) == 1
    u2 = assoc.update(u1.entities, [o], u1.candidates)
    assert u2.created == ("new1",) and u2.entities[0].kind == "unknown"
    # a candidate not seen again is dropped
    u3 = assoc.update([], [], u1.candidates)
    assert u3.candidates == [] and u3.created == ()

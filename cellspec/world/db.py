"""The persistent world model: an embedded SQLite database (WAL) of entities, relations,
task memory and the interaction state CS, changed only by atomic transitions.

Seed 003 (VLM-DEWM) keeps the world outside the planner so that an action's state change
is written only when its effects are observed. Here a transition is one SQLite
transaction: its writes become visible together at COMMIT, or not at all (ROLLBACK, or
the process dies first). WAL with ``synchronous=FULL`` makes a committed transition
survive a crash; ``PRAGMA integrity_check`` is run when a database is opened.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, SupportsFloat

from cellspec.core.errors import CellspecError, Diagnostic

# the phases and relations diagnose rules name: one vocabulary, the language's
from cellspec.dsl.world import PHASES as PHASES
from cellspec.dsl.world import RELATIONS as RELATIONS

FORMAT = "cellspec-world"
VERSION = 2  # 2: entities keep their yaw (degrees) and shape (box | cylinder)
SHAPES = ("box", "cylinder")
MAX_YAW_DEG = 3600.0  # as for a layout part (docs/shapes.md)
DECAY = 0.95  # confidence factor per missed observation
ARCHIVE_BELOW = 0.1  # an entity whose confidence falls below this is archived
LIFECYCLE = ("Active", "Uncertain", "Archived")
BUSY_S = 5.0  # seconds to wait for another writer's lock before reporting it

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE entities (
    id TEXT PRIMARY KEY, type TEXT NOT NULL,
    x REAL NOT NULL, y REAL NOT NULL, z REAL NOT NULL,
    qx REAL NOT NULL, qy REAL NOT NULL, qz REAL NOT NULL, qw REAL NOT NULL,
    sx REAL NOT NULL, sy REAL NOT NULL, sz REAL NOT NULL,
    cov TEXT NOT NULL, confidence REAL NOT NULL, lifecycle TEXT NOT NULL,
    misses INTEGER NOT NULL DEFAULT 0, kind TEXT NOT NULL DEFAULT 'part',
    yaw REAL NOT NULL DEFAULT 0, shape TEXT NOT NULL DEFAULT 'box');
CREATE TABLE relations (rel TEXT NOT NULL, a TEXT NOT NULL, b TEXT NOT NULL,
    PRIMARY KEY (rel, a, b));
CREATE TABLE candidates (id INTEGER PRIMARY KEY, type TEXT NOT NULL, x REAL, y REAL, z REAL,
    sx REAL, sy REAL, sz REAL, hits INTEGER NOT NULL);
CREATE TABLE tasks (node TEXT PRIMARY KEY, idx INTEGER NOT NULL, action TEXT NOT NULL,
    part TEXT NOT NULL, target TEXT NOT NULL, deps TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE history (seq INTEGER PRIMARY KEY, action TEXT NOT NULL, part TEXT NOT NULL,
    outcome TEXT NOT NULL, cause TEXT, recovery TEXT, detail TEXT NOT NULL);
CREATE TABLE cs (id INTEGER PRIMARY KEY CHECK (id = 1), phase TEXT NOT NULL, object TEXT);
"""


def vec3(v: Iterable[SupportsFloat]) -> tuple[float, float, float]:
    """Three plain floats (an entity's pos or size) from a numpy point or a sequence; typed
    as three so an Entity can take it."""
    x, y, z = (float(c) for c in v)
    return (x, y, z)


@dataclass(frozen=True)
class Entity:
    """One believed object: pose (centre, quaternion xyzw), own size, confidence, lifecycle;
    ``yaw`` (degrees about z, the part's own x axis from the world's) and ``shape`` (box, or a
    vertical cylinder whose size is (2R, 2R, H)) as in docs/shapes.md."""

    id: str
    type: str
    pos: tuple[float, float, float]
    size: tuple[float, float, float]
    quat: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)
    cov: tuple[float, float, float] = (1e-6, 1e-6, 1e-6)  # diagonal position covariance, m^2
    confidence: float = 1.0
    lifecycle: str = "Active"
    misses: int = 0
    kind: str = "part"  # part | obstacle | unknown
    yaw: float = 0.0  # degrees about z
    shape: str = "box"  # box | cylinder

    @property
    def plain(self) -> bool:
        """An axis-aligned box (a yaw that is a multiple of 90 degrees)."""
        return self.shape == "box" and math.fmod(self.yaw, 90.0) == 0.0

    def extent(self) -> tuple[float, float, float]:
        """The size of the axis-aligned box enclosing the shape (world axes), metres."""
        if self.shape == "cylinder":
            return self.size
        t = math.radians(self.yaw)
        c, s = abs(math.cos(t)), abs(math.sin(t))
        if math.fmod(self.yaw, 90.0) == 0.0:  # exact: a quarter turn swaps the sizes
            c, s = (0.0, 1.0) if math.fmod(abs(self.yaw), 180.0) == 90.0 else (1.0, 0.0)
        sx, sy, sz = self.size
        return (c * sx + s * sy, s * sx + c * sy, sz)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (rounded to 0.1 mm / 1e-4 so output is stable); ``yaw`` only when it is
        not 0 and ``shape`` only for a cylinder, so box-only output is as before shapes."""
        out: dict[str, Any] = {"id": self.id, "type": self.type, "kind": self.kind,
                               "pos": [round(v, 4) for v in self.pos],
                               "size": [round(v, 4) for v in self.size],
                               "quat": [round(v, 4) for v in self.quat]}
        if self.yaw != 0.0:
            out["yaw"] = round(self.yaw, 4)
        if self.shape != "box":
            out["shape"] = self.shape
        out.update({"confidence": round(self.confidence, 4), "lifecycle": self.lifecycle,
                    "misses": self.misses})
        return out


@dataclass(frozen=True)
class WorldRelation:
    """A relation instance such as on(c2, c1) or holding(gripper, c3)."""

    rel: str
    a: str
    b: str

    def __str__(self) -> str:
        return f"{self.rel}({self.a}, {self.b})"


@dataclass
class Transition:
    """The writes of one action, applied inside one transaction (see World.transition)."""

    action: str
    part: str
    upserts: list[Entity] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    relations: list[WorldRelation] | None = None  # None: leave the relation graph as it is
    cs: tuple[str, str | None] | None = None
    task_status: tuple[str, str] | None = None  # (node, status)
    cause: str | None = None
    recovery: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def _finite(e: Entity) -> None:
    vals = list(e.pos) + list(e.size) + list(e.quat) + [e.confidence, e.yaw]
    if not all(math.isfinite(v) for v in vals):
        raise CellspecError(f"entity '{e.id}': pose, yaw, size and confidence must be finite "
                            "numbers (got NaN or infinity); nothing was written")
    if abs(e.yaw) > MAX_YAW_DEG:
        raise CellspecError(f"entity '{e.id}': yaw {e.yaw:g} is beyond {MAX_YAW_DEG:g} "
                            "degrees; nothing was written")
    if e.shape not in SHAPES:
        raise CellspecError(f"entity '{e.id}': shape must be one of {', '.join(SHAPES)}, "
                            f"not {e.shape!r}; nothing was written")


class World:
    """A world database opened for reading and writing; use :func:`open_world`."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self.conn = conn
        self.path = path
        self.run_token: str | None = None  # the run that claimed it through this connection

    # -- lifecycle -------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection (a checkpoint folds the WAL back into the file)."""
        self.conn.close()

    def __enter__(self) -> World:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check_writable(self) -> None:
        """Refuse (bad input) a database another writer holds locked, or a read-only file,
        before a run starts, instead of failing half-way."""
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            why = ("locked by another writer (tried for "
                   f"{BUSY_S:g} s)") if "locked" in str(exc) or "busy" in str(exc) else str(exc)
            raise _bad(self.path, f"the world database cannot be written: {why}; nothing "
                       "was changed") from None

    def claim_run(self, token: str) -> None:
        """Claim this database for one run, atomically (issue 31): in one ``BEGIN
        IMMEDIATE`` transaction, refuse (bad input naming the file) a database that holds a
        run, is claimed by another run or is locked, else write the claim row (``meta``
        key ``run``, unique). Of two runs racing for one database exactly one wins."""
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            why = ("locked by another writer (tried for "
                   f"{BUSY_S:g} s)") if "locked" in str(exc) or "busy" in str(exc) else str(exc)
            raise _bad(self.path, f"the world database cannot be written: {why}; nothing "
                       "was changed") from None
        try:
            held = self.conn.execute("SELECT 1 FROM meta WHERE key = 'run'").fetchone() or \
                self.conn.execute("SELECT 1 FROM history LIMIT 1").fetchone()
            if held:
                raise _bad(self.path, "the world database already holds a run (or another "
                           "`cellspec run` claimed it first); give a new file (nothing was "
                           "changed)")
            self.conn.execute("INSERT INTO meta VALUES ('run', ?)", (token,))
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        self.run_token = token

    def release_run(self) -> None:
        """Withdraw this connection's claim (its run ended before writing anything), so the
        database may be run into again."""
        if self.run_token is None:
            return
        with self._tx() as c:
            c.execute("DELETE FROM meta WHERE key = 'run' AND value = ?", (self.run_token,))
        self.run_token = None

    # -- reading ---------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        """A metadata value (format, version, cell, ...)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def entities(self, include_archived: bool = True) -> list[Entity]:
        """Every entity, sorted by id."""
        rows = self.conn.execute("SELECT * FROM entities ORDER BY id").fetchall()
        out = [_row_entity(r) for r in rows]
        return out if include_archived else [e for e in out if e.lifecycle != "Archived"]

    def entity(self, eid: str) -> Entity | None:
        """One entity by id, or None."""
        r = self.conn.execute("SELECT * FROM entities WHERE id = ?", (eid,)).fetchone()
        return _row_entity(r) if r else None

    def relations(self) -> list[WorldRelation]:
        """The relation graph, sorted."""
        rows = self.conn.execute("SELECT rel, a, b FROM relations ORDER BY rel, a, b")
        return [WorldRelation(*r) for r in rows]

    def cs(self) -> tuple[str, str | None]:
        """The interaction state CS = (phase, object)."""
        r = self.conn.execute("SELECT phase, object FROM cs WHERE id = 1").fetchone()
        return (r[0], r[1]) if r else ("idle", None)

    def history(self) -> list[dict[str, Any]]:
        """The action history, oldest first."""
        rows = self.conn.execute("SELECT seq, action, part, outcome, cause, recovery, detail "
                                 "FROM history ORDER BY seq").fetchall()
        return [{"seq": s, "action": a, "part": p, "outcome": o, "cause": c, "recovery": rc,
                 "detail": json.loads(d)} for s, a, p, o, c, rc, d in rows]

    def tasks(self) -> list[dict[str, Any]]:
        """The task DAG nodes in order, with their status."""
        rows = self.conn.execute("SELECT node, action, part, target, deps, status FROM tasks "
                                 "ORDER BY idx").fetchall()
        return [{"node": n, "action": a, "part": p, "target": t, "deps": json.loads(d),
                 "status": s} for n, a, p, t, d, s in rows]

    def current_task(self) -> str | None:
        """The first task node not yet done (the task memory's current node)."""
        r = self.conn.execute("SELECT node FROM tasks WHERE status != 'done' ORDER BY idx "
                              "LIMIT 1").fetchone()
        return r[0] if r else None

    def snapshot(self) -> dict[str, Any]:
        """Everything the model believes now, as plain JSON."""
        phase, obj = self.cs()
        return {"cell": self.meta("cell"), "cs": {"phase": phase, "object": obj},
                "entities": [e.to_json() for e in self.entities()],
                "relations": [str(r) for r in self.relations()],
                "current_task": self.current_task(),
                "transitions": len(self.history())}

    # -- writing ---------------------------------------------------------------------
    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT")

    def transition(self, t: Transition, decide: Callable[[], bool] = lambda: True) -> bool:
        """Apply one action's writes atomically; commit only when ``decide()`` holds.

        Every write happens inside one transaction; ``decide`` (the commit condition) is
        evaluated last, and the transaction commits when it returns True and rolls back
        otherwise (a rolled-back action is then recorded in the history on its own).
        Returns whether the writes were committed.
        """
        for e in t.upserts:
            _finite(e)
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self._write(t, "committed")
            ok = bool(decide())
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        if ok:
            self.conn.execute("COMMIT")
            return True
        self.conn.execute("ROLLBACK")
        self.record(t.action, t.part, "rolled_back", t.cause, t.recovery, t.detail)
        return False

    def _write(self, t: Transition, outcome: str) -> None:
        c = self.conn
        for e in t.upserts:
            c.execute("INSERT OR REPLACE INTO entities VALUES "
                      "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                      (e.id, e.type, *e.pos, *e.quat, *e.size, json.dumps(list(e.cov)),
                       e.confidence, e.lifecycle, e.misses, e.kind, e.yaw, e.shape))
        for eid in t.deletes:
            c.execute("DELETE FROM entities WHERE id = ?", (eid,))
        if t.relations is not None:
            c.execute("DELETE FROM relations")
            c.executemany("INSERT OR IGNORE INTO relations VALUES (?,?,?)",
                          [(r.rel, r.a, r.b) for r in t.relations])
        if t.cs is not None:
            c.execute("INSERT OR REPLACE INTO cs VALUES (1, ?, ?)", t.cs)
        if t.task_status is not None:
            c.execute("UPDATE tasks SET status = ? WHERE node = ?", (t.task_status[1],
                                                                      t.task_status[0]))
        c.execute("INSERT INTO history (action, part, outcome, cause, recovery, detail) "
                  "VALUES (?,?,?,?,?,?)", (t.action, t.part, outcome, t.cause, t.recovery,
                                           json.dumps(t.detail, sort_keys=True)))

    def record(self, action: str, part: str, outcome: str, cause: str | None = None,
               recovery: str | None = None, detail: dict[str, Any] | None = None) -> None:
        """Append one history entry (its own transaction)."""
        with self._tx() as c:
            c.execute("INSERT INTO history (action, part, outcome, cause, recovery, detail) "
                      "VALUES (?,?,?,?,?,?)", (action, part, outcome, cause, recovery,
                                               json.dumps(detail or {}, sort_keys=True)))

    def set_tasks(self, nodes: list[dict[str, Any]]) -> None:
        """Replace the task DAG (node, action, part, target, deps) in one transaction."""
        with self._tx() as c:
            c.execute("DELETE FROM tasks")
            for k, n in enumerate(nodes):
                c.execute("INSERT INTO tasks VALUES (?,?,?,?,?,?,?)",
                          (n["node"], k, n["action"], n["part"], n.get("target", ""),
                           json.dumps(n.get("deps", [])), n.get("status", "pending")))

    def set_candidates(self, cands: list[tuple[str, tuple[float, ...], tuple[float, ...], int]]
                       ) -> None:
        """Replace the pending-observation candidates (confirmation window)."""
        with self._tx() as c:
            c.execute("DELETE FROM candidates")
            for k, (typ, pos, size, hits) in enumerate(cands):
                c.execute("INSERT INTO candidates VALUES (?,?,?,?,?,?,?,?,?)",
                          (k, typ, *pos, *size, hits))

    def candidates(self) -> list[tuple[str, tuple[float, ...], tuple[float, ...], int]]:
        """The pending candidates: (type, pos, size, hits)."""
        rows = self.conn.execute("SELECT type, x, y, z, sx, sy, sz, hits FROM candidates "
                                 "ORDER BY id").fetchall()
        return [(r[0], tuple(r[1:4]), tuple(r[4:7]), r[7]) for r in rows]


def _row_entity(r: tuple[Any, ...]) -> Entity:
    return Entity(id=r[0], type=r[1], pos=(r[2], r[3], r[4]), quat=(r[5], r[6], r[7], r[8]),
                  size=(r[9], r[10], r[11]), cov=tuple(json.loads(r[12])), confidence=r[13],
                  lifecycle=r[14], misses=r[15], kind=r[16], yaw=r[17], shape=r[18])


RACE_MSG = ("the world database already holds a run: another `cellspec run` created it at "
            "the same time; give a new file (nothing was changed)")


def _bad(path: str, msg: str) -> CellspecError:
    return CellspecError(Diagnostic(path, 0, 0, msg))


# complexity: every refusal of a corrupt or foreign file, in order
def open_world(path: str | os.PathLike[str], *, create: bool = False,  # noqa: C901
               cell: str | None = None, check: bool = True, run: str | None = None) -> World:
    """Open (or, with ``create``, make) a world database, refusing corrupt or foreign files.

    A file that is not SQLite, a SQLite database that is not a cellspec world, or one that
    fails ``PRAGMA integrity_check`` is reported as bad input and left untouched. ``run``:
    a new database is claimed for this run in the transaction that creates it
    (:meth:`World.claim_run`).
    """
    p = Path(path)
    shown = str(path)
    exists = p.exists() and p.stat().st_size > 0
    if p.is_dir():
        raise _bad(shown, "is a directory, expected a world database file")
    if not exists and not create:
        if p.exists():
            raise _bad(shown, "the file is empty (0 bytes), not a world database "
                       "(cellspec run creates one)")
        raise _bad(shown, "no such world database (cellspec run creates one)")
    if not exists and not p.parent.is_dir():
        raise _bad(shown, f"cannot create the world database: no folder '{p.parent}'")
    if exists:
        with open(p, "rb") as fh:
            head = fh.read(16)
        if head != b"SQLite format 3\x00":
            raise _bad(shown, "not a world database: the file is not SQLite (left untouched)")
    conn = None
    try:
        conn = sqlite3.connect(str(p), isolation_level=None, timeout=BUSY_S)
        if exists:
            if check:
                res = conn.execute("PRAGMA integrity_check").fetchall()
                if res != [("ok",)]:
                    conn.close()
                    raise _bad(shown, "corrupt world database: integrity_check says "
                               f"{'; '.join(str(r[0]) for r in res[:3])}")
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            fmt = None
            if "meta" in tables:
                row = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
                fmt = row[0] if row else None
            if not tables:  # another `cellspec run` is creating it right now
                conn.close()
                raise _bad(shown, RACE_MSG)
            if fmt != FORMAT:
                conn.close()
                raise _bad(shown, "not a cellspec world database (a foreign SQLite file; "
                           "left untouched)")
            ver = conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
            if ver is None or ver[0] != str(VERSION):
                conn.close()
                old = (" (version 1 was written before entities kept their yaw and shape; "
                       "run the layout again into a new database)") if ver and ver[0] == "1" \
                    else ""
                raise _bad(shown, f"world database version {ver[0] if ver else '?'} is not "
                           f"supported (this cellspec reads version {VERSION}){old}; left "
                           "untouched")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        if not exists:
            conn.execute("BEGIN IMMEDIATE")
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
                conn.execute("ROLLBACK")  # the other process won the race to create it
                conn.close()
                raise _bad(shown, RACE_MSG)
            for stmt in _SCHEMA.strip().split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
            conn.execute("INSERT INTO meta VALUES ('version', ?)", (str(VERSION),))
            conn.execute("INSERT INTO meta VALUES ('cell', ?)", (cell or "",))
            conn.execute("INSERT INTO cs VALUES (1, 'idle', NULL)")
            if run is not None:
                conn.execute("INSERT INTO meta VALUES ('run', ?)", (run,))
            conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        if conn is not None:
            conn.close()
        if not exists and ("locked" in str(exc) or "busy" in str(exc)):
            # SQLite can refuse the WAL switch at once (no busy wait) while another process
            # is creating the same file: that process won the race
            raise _bad(shown, RACE_MSG) from None
        if "locked" in str(exc) or "busy" in str(exc):
            raise _bad(shown, "the world database is locked by another writer (tried for "
                       f"{BUSY_S:g} s); nothing was changed") from None
        if not exists:
            raise _bad(shown, f"cannot create the world database: {exc} (is the folder "
                       "writable?)") from None
        raise _bad(shown, f"corrupt or unreadable world database: {exc}") from None
    w = World(conn, shown)
    w.run_token = run if not exists else None
    return w

"""Hostile input to `cellspec run`, `diagnose` and `world`: clear messages, exit 2 (1 for a
real verdict), never a traceback, and nothing lost from an existing database; plus the
trace gate, occlusion and the guarded place in real runs (in-process, gripper engine where
the engine does not matter, to keep the default run lean)."""

from __future__ import annotations

import copy
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

import cellspec.world.db as wdb
from cellspec.cli import main
from cellspec.core.errors import CellspecError
from cellspec.dsl.parser import load_cell
from cellspec.layout import load_layout
from cellspec.world.db import open_world
from cellspec.world.run import _Runner, check_faults, parse_faults, run_layout
from tests.conftest import REPO, STATION

W = REPO / "rules" / "world"
LAYOUT = W / "tower_row.json"
WALL = REPO / "rules" / "layouts" / "wall_9.json"


def cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit code, stdout, stderr)."""
    try:
        rc = main([str(a) for a in args])
    except SystemExit as exc:  # argparse usage errors
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return rc, out, err


def rows(db: Path) -> dict[str, list[tuple]]:
    """Every row of every table (the database's content, order-independent)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {n: sorted(map(tuple, con.execute(f"SELECT * FROM {n}"))) for n in names}
    finally:
        con.close()


@pytest.fixture(scope="module")
def cell():  # noqa: ANN201
    return load_cell(STATION)


@pytest.fixture(scope="module")
def good_db(tmp_path_factory: pytest.TempPathFactory, cell) -> Path:  # noqa: ANN001
    db = tmp_path_factory.mktemp("world") / "good.db"
    r = run_layout(cell, load_layout(LAYOUT), db, engine="gripper", seed=1)
    assert r.success, r.reason
    return db


# -- database paths ----------------------------------------------------------------------
def _make(kind: str, tmp: Path, good: Path) -> Path:
    p = tmp / f"{kind}.db"
    if kind == "zero":
        p.write_bytes(b"")
    elif kind == "junk":
        p.write_text("hello, not a database\n")
    elif kind == "binary":
        p.write_bytes(bytes(range(256)) * 64)
    elif kind == "truncated":
        raw = good.read_bytes()
        p.write_bytes(raw[: len(raw) // 2])
    elif kind == "header":
        p.write_bytes(good.read_bytes()[:100])
    elif kind == "foreign":
        con = sqlite3.connect(str(p))
        con.execute("CREATE TABLE meta (key TEXT, value TEXT)")
        con.execute("INSERT INTO meta VALUES ('format', 'something-else')")
        con.commit()
        con.close()
    elif kind == "directory":
        p.mkdir()
    return p


DB_CASES = [("zero", "empty (0 bytes)"), ("junk", "not SQLite"), ("binary", "not SQLite"),
            ("truncated", "malformed"), ("header", "malformed"),
            ("foreign", "foreign SQLite"), ("directory", "is a directory"),
            ("missing", "no such world database")]


@pytest.mark.parametrize("kind, msg", DB_CASES)
@pytest.mark.parametrize("verb", ["show", "history", "relations", "trace"])
def test_world_verbs_refuse_bad_databases(capsys, tmp_path: Path, good_db: Path, kind: str,
                                          msg: str, verb: str) -> None:  # noqa: ANN001
    p = _make(kind, tmp_path, good_db)
    before = p.read_bytes() if p.is_file() else None
    extra = [W / "trace_ok.json"] if verb == "trace" else []
    rc, out, err = cli(capsys, "world", verb, p, *extra)
    assert rc == 2 and msg in err and str(p) in err and out == ""
    if before is not None:
        assert p.read_bytes() == before  # left untouched
    assert sorted(x.name for x in tmp_path.iterdir()) == sorted(
        [p.name] if kind != "missing" else [])  # no -wal / -shm left behind


@pytest.mark.parametrize("kind, msg", [c for c in DB_CASES if c[0] not in ("zero", "missing")])
def test_run_refuses_bad_databases_untouched(capsys, tmp_path: Path, good_db: Path, kind: str,
                                             msg: str) -> None:  # noqa: ANN001
    p = _make(kind, tmp_path, good_db)
    before = p.read_bytes() if p.is_file() else None
    rc, out, err = cli(capsys, "run", STATION, LAYOUT, "--world", p, "--engine", "gripper")
    assert rc == 2 and msg in err and out == ""
    if before is not None:
        assert p.read_bytes() == before


def test_run_refuses_a_database_that_holds_a_run_or_another_cell(capsys, tmp_path: Path,
                                                                 good_db: Path) -> None:  # noqa: ANN001
    db = tmp_path / "w.db"
    shutil.copy(good_db, db)
    before, content = db.read_bytes(), rows(db)
    rc, out, err = cli(capsys, "run", STATION, LAYOUT, "--world", db, "--engine", "gripper")
    assert rc == 2 and "already holds a run" in err and out == ""
    assert db.read_bytes() == before and rows(db) == content
    other = tmp_path / "other.db"
    open_world(other, create=True, cell="sort_cubes").close()
    before = other.read_bytes()
    rc, out, err = cli(capsys, "run", STATION, LAYOUT, "--world", other, "--engine", "gripper")
    assert rc == 2 and "belongs to cell 'sort_cubes', not 'dual_arm_station'" in err
    assert other.read_bytes() == before


def test_run_refuses_a_database_locked_by_another_writer(capsys, tmp_path: Path,
                                                         monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(wdb, "BUSY_S", 0.2)
    db = tmp_path / "w.db"
    open_world(db, create=True, cell="dual_arm_station").close()
    holder = sqlite3.connect(str(db), isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("INSERT INTO history (action, part, outcome, detail) "
                       "VALUES ('other', '*', 'committed', '{}')")
        rc, out, err = cli(capsys, "run", STATION, LAYOUT, "--world", db, "--engine", "gripper")
        assert rc == 2 and "locked by another writer" in err and out == ""
        # reading while another process writes works (WAL): the writer's row is not visible
        rc, out, err = cli(capsys, "world", "history", db)
        assert rc == 0 and out == ""
        holder.execute("COMMIT")
    finally:
        holder.close()
    assert [h["action"] for h in open_world(db).history()] == ["other"]


def test_run_world_in_a_missing_folder_and_empty_file(capsys, tmp_path: Path) -> None:  # noqa: ANN001
    rc, _, err = cli(capsys, "run", STATION, LAYOUT, "--world", tmp_path / "no" / "w.db",
                     "--engine", "gripper")
    assert rc == 2 and "cannot create the world database: no folder" in err
    assert not (tmp_path / "no").exists()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")  # an empty file holds nothing: run may make it a world
    rc, out, _ = cli(capsys, "run", STATION, LAYOUT, "--world", empty, "--engine", "gripper")
    assert rc == 0 and "summary: built" in out
    assert open_world(empty).meta("cell") == "dual_arm_station"


# -- run arguments, layouts, cells ---------------------------------------------------------
@pytest.mark.parametrize("faults, msg", [
    ("slip@9", "slip@9 is beyond the last action (8 planned actions for 4 parts)"),
    ("moved@99999999999999999999", "beyond the last action"),
    ("slip@0", "bad item 'slip@0'"), ("slip@-1", "bad item 'slip@-1'"),
    ("melt@3", "bad item 'melt@3'"), ("slip@3,slip@3", "at most one fault per action"),
    ("slip@3,,", "bad item ''"), ("support@4", "N must be a pick (odd)"),
    ("support@1", "the part picked at action 1 (c1) stands on no other part"),
])
def test_bad_faults_are_refused_before_anything_is_created(capsys, tmp_path: Path, faults: str,
                                                           msg: str) -> None:  # noqa: ANN001
    db = tmp_path / "w.db"
    rc, out, err = cli(capsys, "run", STATION, LAYOUT, "--world", db, "--faults", faults,
                       "--engine", "gripper")
    assert rc == 2 and msg in err and out == "" and not db.exists()


@pytest.mark.parametrize("flag, value, msg", [
    ("--seed", "-1", "--seed must not be negative"), ("--noise", "nan", "--noise must be"),
    ("--noise", "1e308", "--noise must be"), ("--occlusion", "1.5", "--occlusion must be"),
    ("--occlusion", "nan", "--occlusion must be"), ("--seed", "x", "invalid int value"),
])
def test_bad_run_options(capsys, tmp_path: Path, flag: str, value: str, msg: str) -> None:  # noqa: ANN001
    db = tmp_path / "w.db"
    rc, _, err = cli(capsys, "run", STATION, LAYOUT, "--world", db, flag, value)
    assert rc == 2 and msg in err and not db.exists()


@pytest.mark.parametrize("layout, msg", [
    ("wall_9_row_moved.json", "workspace: w7 leaves the workspace"),
    ("dense_block_12_overlap.json", "no_overlap: b7 overlaps b8"),
])
def test_run_refuses_a_layout_that_fails_its_rules(capsys, tmp_path: Path, layout: str,
                                                   msg: str) -> None:  # noqa: ANN001
    db = tmp_path / "w.db"
    rc, out, err = cli(capsys, "run", STATION, REPO / "rules" / "layouts" / layout, "--world",
                       db, "--format", "json")
    assert rc == 1 and "refused: the layout fails its rules" in err and msg in err
    res = json.loads(out)
    assert res["summary"]["refused"] is True and res["steps"] == []
    assert not db.exists()  # nothing built, nothing written


def test_run_refuses_a_cell_without_robots_or_rules(capsys, tmp_path: Path) -> None:  # noqa: ANN001
    text = STATION.read_text()
    norobot = tmp_path / "norobot.cell"
    norobot.write_text("\n".join(ln for ln in text.splitlines()
                                 if not ln.strip().startswith(("robot ", "home "))))
    norules = tmp_path / "norules.cell"
    norules.write_text(text.replace("import diagnosis\n", ""))
    for c, engine, msg in ((norobot, "arm", "the cell has no robot for the arm engine"),
                           (norobot, "auto", "the cell has no robot for the arm engine"),
                           (norules, "gripper", "no commit condition for 'pick'")):
        db = tmp_path / "w.db"
        rc, out, err = cli(capsys, "run", c, LAYOUT, "--world", db, "--engine", engine)
        assert rc == 2 and msg in err and out == "" and not db.exists(), (c, engine)


def test_user_commit_rule_overrides_library_and_is_a_verdict(capsys, tmp_path: Path) -> None:  # noqa: ANN001
    strict = tmp_path / "strict.cell"
    strict.write_text(f'import "{STATION}"\n\ncommit pick "never" : controller_ok and '
                      "track_error <= 0.0000001\n")
    rc, out, _ = cli(capsys, "run", strict, LAYOUT, "--world", tmp_path / "w.db", "--engine",
                     "gripper")
    assert rc == 1 and "1  pick  c1     rolled back (track_error <= 1e-07)" in out
    assert "summary: NOT built (gave up on c1 after 3 retries)" in out


# -- state and trace files -------------------------------------------------------------------
OBS = json.loads((W / "slip_observed.json").read_text())


def _obs(f) -> str:  # noqa: ANN001
    o = copy.deepcopy(OBS)
    f(o)
    return json.dumps(o)


STATE_CASES = [
    ("empty", "", ":1:1: the state file is empty"),
    ("truncated", json.dumps(OBS)[:50], ":1:43: invalid JSON"),
    ("binary", bytes(range(256)), "not a state JSON file (not UTF-8 text)"),
    ("nan", _obs(lambda o: o["objects"][0].update(pos=[float("nan"), 0, 0])),
     "objects[0]: 'pos' holds NaN or infinity"),
    ("huge-number", _obs(lambda o: o["objects"][0].update(pos=[1e308, 0, 0])),
     "objects[0]: 'pos' holds a value beyond 1000 m"),
    ("overflow", json.dumps(OBS).replace("0.155", "1e400"), "gripper.pos: NaN or infinity"),
    ("gripper-far", _obs(lambda o: o["gripper"].update(pos=[0, 0, -5e3])),
     "gripper.pos: a coordinate beyond 1000 m"),
    ("missing-pos", _obs(lambda o: o["objects"][0].pop("pos")), "'pos' must be a list of 3"),
    ("missing-type", _obs(lambda o: o["objects"][0].pop("type")), "'type' must be a non-empty"),
    ("unknown-type", _obs(lambda o: o["objects"][0].update(type="widget")),
     "objects[0]: unknown part type 'widget' (the cell defines: cube)"),
    ("unknown-entity", _obs(lambda o: (o["objects"][0].update(id="c1"),
                                       o["objects"][1].update(id="c2"),
                                       o.update(relations=["on(zz, table)"]))),
     "relations[0] names unknown entity 'zz'"),
    ("duplicate-ids", _obs(lambda o: [x.update(id="c1") for x in o["objects"]]),
     "object ids must be unique"),
    ("bad-measure", _obs(lambda o: o["measures"].update(grasp_force="strong")),
     "measure 'grasp_force' must be a finite number"),
    ("unknown-key", _obs(lambda o: o.update(colour="red")), "unknown keys ['colour']"),
    ("deep", '{"a":' * 5000 + "1" + "}" * 5000, "nested too deeply"),
    ("list", "[1, 2]", "a state file is a JSON object"),
    ("too-many", json.dumps({"objects": [{"type": "cube", "pos": [0.4, 0.2, 0.025]}] * 2001}),
     "2001 objects; a state holds at most 2000"),
]


@pytest.mark.parametrize("name, text, msg", STATE_CASES, ids=[c[0] for c in STATE_CASES])
def test_diagnose_refuses_bad_state_files(capsys, tmp_path: Path, name: str, text: str | bytes,
                                          msg: str) -> None:  # noqa: ANN001
    p = tmp_path / "observed.json"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    rc, out, err = cli(capsys, "diagnose", STATION, W / "slip_expected.json", p)
    assert rc == 2 and msg in err and str(p) in err and out == ""


def test_diagnose_refuses_huge_and_directory_files(capsys, tmp_path: Path,
                                                   monkeypatch) -> None:  # noqa: ANN001
    import cellspec.world.discrepancy as disc

    monkeypatch.setattr(disc, "MAX_JSON_BYTES", 1000)
    big = tmp_path / "big.json"
    big.write_text(json.dumps(OBS) + " " * 2000)
    rc, _, err = cli(capsys, "diagnose", STATION, W / "slip_expected.json", big)
    assert rc == 2 and "larger than" in err
    rc, _, err = cli(capsys, "diagnose", STATION, W / "slip_expected.json", tmp_path)
    assert rc == 2 and "is a directory, expected a state JSON file" in err


TRACE = json.loads((W / "trace_ok.json").read_text())


def _tr(f) -> str:  # noqa: ANN001
    o = copy.deepcopy(TRACE)
    f(o)
    return json.dumps(o)


TRACE_CASES = [
    ("empty", "", 2, "the trace file is empty"),
    ("binary", bytes(range(256)), 2, "not a trace JSON file"),
    ("nan", _tr(lambda o: o.update(confidence=float("nan"))), 2,
     "confidence: Input should be a finite number"),
    ("1e308", _tr(lambda o: o.update(confidence=1e308)), 2, "less than or equal to 1"),
    ("missing", _tr(lambda o: o.pop("action")), 2, "action: Field required"),
    ("unknown-entity", _tr(lambda o: o.update(belief=["on(zz, table)"])), 2,
     "on(zz, table) names unknown entity 'zz'"),
    ("unknown-relation", _tr(lambda o: o.update(belief=["glued(c1, c2)"])), 2,
     "unknown relation 'glued'"),
    ("at-far", _tr(lambda o: o["action"].update(kind="place", target="c1", at=[1e308, 0, 0])),
     2, "'at' must be three finite coordinates"),
    ("deep", '{"a":' * 5000 + "1" + "}" * 5000, 2, "nested too deeply"),
    ("wrong-physics", _tr(lambda o: o.update(belief=["on(c1, c2)"])), 1,
     "on(c1, c2): the centroid is not over the support"),
    ("place-off-support", _tr(lambda o: o["action"].update(
        kind="place", object="c2", target="c1", at=[0.40, 0.26, 0.075])), 1,
     "place c2 at (0.400, 0.260, 0.075) would not give on(c2, c1)"),
]


@pytest.mark.parametrize("name, text, code, msg", TRACE_CASES, ids=[c[0] for c in TRACE_CASES])
def test_trace_files(capsys, tmp_path: Path, good_db: Path, name: str, text: str | bytes,
                     code: int, msg: str) -> None:  # noqa: ANN001
    p = tmp_path / "trace.json"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    content = rows(good_db)
    rc, out, err = cli(capsys, "world", "trace", good_db, p)
    assert rc == code and msg in out + err
    assert rows(good_db) == content  # validating writes nothing


def test_trace_from_a_device_is_bounded(capsys, good_db: Path) -> None:  # noqa: ANN001
    """Issue 16, defect 7: `world trace DB /dev/zero` reads at most the limit, then refuses."""
    rc, out, err = cli(capsys, "world", "trace", good_db, "/dev/zero")
    assert rc == 2 and "the trace file is larger than 16 MB" in err and "Traceback" not in err


def test_place_trace_on_its_support_is_accepted(capsys, tmp_path: Path, good_db: Path) -> None:  # noqa: ANN001
    p = tmp_path / "trace.json"
    p.write_text(_tr(lambda o: o["action"].update(kind="place", object="c2", target="c1",
                                                  at=[0.40, 0.20, 0.075])))
    rc, out, _ = cli(capsys, "world", "trace", good_db, p)
    assert rc == 0 and "trace accepted" in out


# -- the trace gate, occlusion, the guarded place, and what diagnosis may see ----------------
def test_displaced_support_rejects_the_place_trace_before_it_moves(cell, tmp_path: Path) -> None:  # noqa: ANN001
    db = tmp_path / "w.db"
    r = run_layout(cell, load_layout(LAYOUT), db, faults=parse_faults("support@3"),
                   engine="gripper")
    assert not r.success
    assert [(s.label, s.kind, s.part, s.outcome) for s in r.steps] == [
        ("1", "pick", "c1", "committed"), ("2", "place", "c1", "committed"),
        ("3", "pick", "c2", "committed"), ("4", "place", "c2", "rejected")]
    assert r.steps[2].causes[0]["cause"] == "moved" and r.steps[2].causes[0]["objects"] == ["c1"]
    assert r.steps[3].note == "trace rejected at the physics stage"
    assert "would not give on(c2, c1)" in r.steps[3].failed[0]
    assert r.reason.startswith("the reasoning trace of 4 was rejected (physics)")
    with open_world(db) as w:
        hist = w.history()
        assert [h["outcome"] for h in hist if h["action"] == "trace"] == ["rejected"]
        assert w.cs() == ("holding", "c2")  # c2 never left the hand: nothing moved
        # the place's own transition never ran: its task is still pending
        assert w.current_task() == "place:c2"


def test_occlusion_drives_the_lifecycle_through_a_run(cell) -> None:  # noqa: ANN001
    lay = load_layout(LAYOUT)
    r = run_layout(cell, lay, None, occlusion=0.3, seed=0, engine="gripper")
    assert r.success, r.reason
    moves = {(x["from"], x["to"]) for x in r.lifecycle}
    assert ("Active", "Uncertain") in moves and ("Uncertain", "Active") in moves
    down = [x for x in r.lifecycle if x["to"] == "Uncertain"]
    assert all(x["confidence"] < 1.0 for x in down) and any(x["confidence"] == 0.95 for x in down)
    assert all(s.outcome == "committed" for s in r.steps)  # occlusion is not a discrepancy
    again = run_layout(cell, lay, None, occlusion=0.3, seed=0, engine="gripper")
    assert json.dumps(again.to_json()) == json.dumps(r.to_json())  # seeded
    plain = run_layout(cell, lay, None, seed=0, engine="gripper")
    assert plain.lifecycle == []


def test_diagnosis_sees_observations_not_fault_labels(cell, monkeypatch) -> None:  # noqa: ANN001
    """A `moved` fault whose displacement never happens is not diagnosed: the cause comes
    from what is observed, not from the label of the injected fault."""
    monkeypatch.setattr(_Runner, "apply_moved", lambda self, part=None: "c1")
    r = run_layout(cell, load_layout(LAYOUT), None, faults=parse_faults("moved@5"),
                   engine="gripper")
    assert r.success and r.first_diagnosis == {}
    assert all(not s.causes for s in r.steps)
    assert r.steps[4].note == "moved@5: c1 displaced"  # the label was there


def test_check_faults_in_process(cell) -> None:  # noqa: ANN001
    lay = load_layout(LAYOUT)
    check_faults(parse_faults("support@3,slip@8"), cell, lay)  # c2 stands on c1: fine
    with pytest.raises(CellspecError, match="beyond the last action"):
        check_faults(parse_faults("obstacle@9"), cell, lay)


@pytest.mark.slow
def test_guarded_place_builds_the_wall(cell) -> None:  # noqa: ANN001
    """Seed 0 of the wall of touching cubes jammed (gave up on w6) before the guarded
    place; now it backs off along the contact and builds without a rollback."""
    r = run_layout(cell, load_layout(WALL), None, seed=0)
    assert r.success, r.reason
    assert r.place_corrections >= 1 and r.max_error < 0.003
    assert [s.outcome for s in r.steps] == ["committed"] * 18


def test_a_run_reports_two_causes_ranked(capsys, tmp_path: Path) -> None:  # noqa: ANN001
    rc, out, _ = cli(capsys, "run", W / "ambiguous.cell", LAYOUT, "--world", tmp_path / "w.db",
                     "--faults", "slip@4", "--engine", "gripper")
    assert rc == 0
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("4  place"))
    assert "slip(c2) -> regrasp [AMBIGUOUS: also dropped(c2); took the top-ranked]" in line
    with open_world(tmp_path / "w.db") as w:
        diag = [h for h in w.history() if h["action"] == "diagnosis"]
        assert [h["outcome"] for h in diag] == ["ambiguous"]
        assert [c["cause"] for c in diag[0]["detail"]["causes"]] == ["slip", "dropped"]

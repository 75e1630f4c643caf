"""cellspec batch, in process (--serial): inputs, records, order, verbs, exit codes, bad input.

The Dask runs (LocalCluster, a real scheduler with workers, a killed worker, a crashing
layout) are in test_batch_dask.py.
"""

from __future__ import annotations

import io
import json
import socket
import time
from pathlib import Path

import pytest
from conftest import STATION

from cellspec.cli import main

SRC_GRAVITY = "cellspec/rules/physical.cell:17:1"


def tower(n: int, float_top: bool = False, order: bool = False, ident: str | None = None
          ) -> dict:
    """n cubes on the station's table as towers of up to 3; ``float_top`` lifts the last
    cube 1 cm off its support (one gravity violation); ``order`` adds the bottom-up order."""
    parts = []
    for k in range(n):
        col, lvl = divmod(k, 3)
        x, y = 0.25 + 0.07 * (col % 6), 0.10 + 0.07 * (col // 6)
        parts.append({"id": f"c{k}", "type": "cube", "pos": [x, y, 0.025 + 0.05 * lvl]})
    if float_top:
        parts[-1]["pos"][2] += 0.01
    out: dict = {"parts": parts}
    if order:
        out["order"] = [p["id"] for p in parts]
    if ident is not None:
        out = {"id": ident, **out}
    return out


def batch(capsys, *args: str) -> tuple[int, list[dict], str]:
    """Run ``cellspec batch --serial ARGS`` in process: (exit code, records, stderr)."""
    code = main(["batch", str(STATION), *args, "--serial"])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


@pytest.fixture()
def mixed(tmp_path: Path) -> Path:
    """A JSON-lines file: 3 good layouts, 2 failing, a blank line, 2 bad lines."""
    lines = [json.dumps(tower(5, ident="a")), json.dumps(tower(7, float_top=True, ident="b")),
             "", json.dumps(tower(6)), json.dumps(tower(9, float_top=True, order=True)),
             '{"parts": [oops', json.dumps(tower(4, ident="e")),
             '{"id": 3, "parts": []}']
    p = tmp_path / "mixed.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_jsonl_records_in_order_with_named_violations(capsys, mixed):
    code, recs, err = batch(capsys, str(mixed))
    assert [r["id"] for r in recs] == ["a", "b", f"{mixed}:4", f"{mixed}:5", f"{mixed}:6",
                                       "e", f"{mixed}:8"]
    assert [r["verdict"] for r in recs] == ["pass", "fail", "pass", "fail", "bad input",
                                            "pass", "bad input"]
    assert [(v["rule"], v["parts"], v["source"]) for v in recs[1]["violations"]] == \
        [("gravity", ["c6"], SRC_GRAVITY)]
    assert [(v["rule"], v["parts"]) for v in recs[3]["violations"]] == [("gravity", ["c8"])]
    assert recs[4]["errors"] == [f"{mixed}:6:12: error: invalid JSON: Expecting value"]
    assert "must be a non-empty string" in recs[6]["errors"][0]
    assert all(set(r) >= {"id", "verdict", "violations", "seconds"} for r in recs)
    assert err.strip().splitlines()[-1].startswith("3 pass, 2 fail, 0 unknown, 2 bad input (7 ")
    assert code == 2  # bad input in some layout


def test_files_directories_and_stdin_in_input_order(capsys, tmp_path, monkeypatch):
    d = tmp_path / "dir"
    (d / "sub").mkdir(parents=True)
    (d / "b.json").write_text(json.dumps(tower(3)))
    (d / "sub" / "a.json").write_text(json.dumps(tower(4, float_top=True)))
    (d / "notes.txt").write_text("not a layout")
    one = tmp_path / "one.json"
    one.write_text(json.dumps(tower(2)))
    stdin = json.dumps(tower(5, ident="from-stdin")) + "\n"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    code, recs, err = batch(capsys, str(one), str(d), "-", "--no-timings")
    assert [r["id"] for r in recs] == [str(one), str(d / "b.json"), str(d / "sub" / "a.json"),
                                       "from-stdin"]
    assert [r["verdict"] for r in recs] == ["pass", "pass", "fail", "pass"]
    assert all("seconds" not in r for r in recs)
    assert err.strip() == "3 pass, 1 fail, 0 unknown, 0 bad input"
    assert code == 1


def test_all_pass_exits_0_and_output_file_gets_summary(capsys, tmp_path):
    src = tmp_path / "ok.jsonl"
    src.write_text("".join(json.dumps(tower(n)) + "\n" for n in (5, 12, 20)))
    out = tmp_path / "res.jsonl"
    code = main(["batch", str(STATION), str(src), "--serial", "-o", str(out), "--no-timings"])
    stdout, _ = capsys.readouterr()
    assert code == 0
    assert stdout.strip() == "3 pass, 0 fail, 0 unknown, 0 bad input"
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["verdict"] for r in recs] == ["pass"] * 3
    assert not list(tmp_path.glob(".res.jsonl.*"))  # the temporary file was renamed


def test_same_input_byte_identical_whatever_the_chunk_size(capsys, mixed):
    outs = []
    for chunk in ("1", "3", "100"):
        main(["batch", str(STATION), str(mixed), "--serial", "--no-timings", "--chunk", chunk])
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] == outs[2] and outs[0].count("\n") == 7


def test_repair_writes_repaired_layouts_to_out_dir(capsys, tmp_path):
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(tower(4, float_top=True, ident="lifted")) + "\n"
                   + json.dumps(tower(3, ident="fine")) + "\n")
    out_dir = tmp_path / "fixed"
    code, recs, _ = batch(capsys, str(src), "--verb", "repair", "--out-dir", str(out_dir))
    assert code == 0
    assert [(r["id"], r["verdict"], r["status"]) for r in recs] == [
        ("lifted", "pass", "optimal"), ("fine", "pass", "optimal")]
    assert recs[0]["moved"] == ["c3"] and recs[0]["violations"][0]["rule"] == "gravity"
    assert recs[1]["already_valid"] and "output" not in recs[1]
    written = Path(recs[0]["output"])
    assert written.parent == out_dir and written.name == "000001-lifted.json"
    code2, again, _ = batch(capsys, str(written))
    assert code2 == 0 and again[0]["verdict"] == "pass"


def test_plan_gives_an_order(capsys, tmp_path):
    src = tmp_path / "p.jsonl"
    src.write_text(json.dumps(tower(6, ident="t6")) + "\n")
    code, recs, _ = batch(capsys, str(src), "--verb", "plan")
    assert code == 0 and recs[0]["verdict"] == "pass" and recs[0]["status"] == "optimal"
    order = recs[0]["order"]
    assert sorted(order) == [f"c{k}" for k in range(6)]
    assert order.index("c0") < order.index("c1") < order.index("c2")  # bottom up


def test_settle_verb_runs_or_says_it_is_not_in_this_build(capsys, tmp_path):
    from cellspec.batch.work import settle_available

    src = tmp_path / "s.jsonl"
    src.write_text(json.dumps(tower(3, ident="t3")) + "\n")
    code = main(["batch", str(STATION), str(src), "--serial", "--verb", "settle"])
    out, err = capsys.readouterr()
    why = settle_available()
    if why is not None:
        assert code == 2 and out == ""
        assert "--verb settle is not available in this build" in err
    else:
        recs = [json.loads(x) for x in out.splitlines()]
        assert recs[0]["id"] == "t3" and recs[0]["verdict"] == "pass" and code == 0


@pytest.mark.parametrize("args, message", [
    (["--workers", "0"], "--workers must be at least 1"),
    (["--chunk", "0"], "--chunk must be at least 1"),
    (["--serial", "--workers", "2"], "it cannot go with --serial"),
    (["--out-dir", "x"], "--out-dir is for --verb repair"),
    (["--scheduler", "not an address"], "expected a Dask scheduler address"),
    (["--connect-timeout", "0"], "--connect-timeout must be a positive number"),
])
def test_usage_errors_exit_2_with_a_message(capsys, tmp_path, args, message):
    src = tmp_path / "x.jsonl"
    src.write_text(json.dumps(tower(2)) + "\n")
    code = main(["batch", str(STATION), str(src), *args])
    _, err = capsys.readouterr()
    assert code == 2 and message in err and "Traceback" not in err


def test_missing_input_and_bad_cell_exit_2_before_any_work(capsys, tmp_path):
    code = main(["batch", str(STATION), str(tmp_path / "nope.jsonl"), "--serial"])
    _, err = capsys.readouterr()
    assert code == 2 and "nope.jsonl: error: no such file or directory" in err
    bad = tmp_path / "bad.cell"
    bad.write_text("cell broken {\n    units parsecs\n}\n")
    src = tmp_path / "x.jsonl"
    src.write_text(json.dumps(tower(2)) + "\n")
    code = main(["batch", str(bad), str(src), "--serial"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and f"{bad}:2:" in err


def test_unreachable_scheduler_is_exit_2_within_seconds(capsys, tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    src = tmp_path / "x.jsonl"
    src.write_text(json.dumps(tower(2)) + "\n")
    t0 = time.monotonic()
    code = main(["batch", str(STATION), str(src), "--scheduler", f"tcp://127.0.0.1:{port}",
                 "--connect-timeout", "2"])
    took = time.monotonic() - t0
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port} within 2 s" in err
    assert took < 10, took


def test_rule_tests_on_an_unreachable_scheduler_exit_2(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rules = Path(__file__).resolve().parent.parent / "rules" / "stdlib" / "physical_tests.cell"
    code = main(["test", str(rules), "--scheduler", f"127.0.0.1:{port}"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port} within 5 s" in err
    code = main(["test", str(rules), "--scheduler", f"127.0.0.1:{port}", "--workers", "2"])
    assert code == 2 and "--workers is the local process pool" in capsys.readouterr().err


def test_scheduler_address_from_flag_or_environment(monkeypatch):
    from cellspec.batch.cluster import scheduler_address
    from cellspec.core.errors import CellspecError

    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    assert scheduler_address(None) is None
    assert scheduler_address("10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    assert scheduler_address("tls://sched.example:8786") == "tls://sched.example:8786"
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:8786")
    assert scheduler_address(None) == "tcp://127.0.0.1:8786"
    for bad in ("tcp://host", "host:0", "host:99999", "ftp://h:1", "a b:1"):
        with pytest.raises(CellspecError, match="expected a Dask scheduler address"):
            scheduler_address(bad)


def test_adaptive_chunks_aim_at_half_a_second_of_work():
    from cellspec.batch.stream import FIRST_CHUNK, MAX_CHUNK, ChunkSizer, serial_map

    s = ChunkSizer(None)
    assert s.size() == FIRST_CHUNK
    s.observe(0.04, 4)  # 10 ms a layout
    assert s.size() == 50
    s.observe(0.0, 1000)
    assert 50 < s.size() <= MAX_CHUNK
    assert ChunkSizer(7).size() == 7
    got = list(serial_map(lambda k, xs: [k * x for x in xs], (3,), range(10), chunk=4))
    assert got == [3 * x for x in range(10)]


PREFS = Path(__file__).resolve().parent.parent / "rules" / "examples" / "preferences.cell"


def test_check_records_carry_preferences_as_check_json(capsys, tmp_path):
    """A cell with preferences: each record has check's ``preferences`` object (score and
    unmet, with weights); a cell without them: no such key (the records are unchanged)."""
    stacked = {"id": "stacked", "parts": [
        {"id": "s1", "type": "slab", "pos": [0.30, 0.20, 0.01]},
        {"id": "c1", "type": "cube", "pos": [0.30, 0.20, 0.045]},
        {"id": "c2", "type": "cube", "pos": [0.52, 0.20, 0.025]}], "order": ["s1", "c1", "c2"]}
    src = tmp_path / "p.jsonl"
    src.write_text(json.dumps(stacked) + "\n")
    code = main(["batch", str(PREFS), str(src), "--serial", "--no-timings"])
    recs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert code == 0 and [r["verdict"] for r in recs] == ["pass"]
    one = tmp_path / "stacked.json"
    one.write_text(json.dumps({k: v for k, v in stacked.items() if k != "id"}))
    assert main(["check", str(PREFS), str(one), "--format", "json"]) == 0
    want = json.loads(capsys.readouterr().out)["preferences"]
    assert recs[0]["preferences"] == want
    assert (want["met"], want["total"]) == (17, 20)
    assert [(u["rule"], u["parts"], u["weight"]) for u in want["unmet"]] == [
        ("near_home", ["c2"], 1), ("compact", ["c1", "c2"], 2)]
    assert list(recs[0]) == ["id", "verdict", "violations", "preferences"]
    code, plain, _ = batch(capsys, str(src))
    assert plain and all("preferences" not in r for r in plain)

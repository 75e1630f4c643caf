"""Issue 16, input and output safety: bounded reads from anything, writes that never
clobber what the path names (FIFO, device, symlink, file modes)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, STATION

import cellspec
from cellspec.core.io import TooLarge, atomic_write, read_bounded

WALL = REPO / "rules" / "layouts" / "wall_9.json"


def test_read_bounded_stops_at_the_limit_on_a_device():
    with pytest.raises(TooLarge) as exc:
        read_bounded("/dev/zero", 1000)
    assert exc.value.size is None and "more than 1000 bytes" in str(exc.value)


def test_read_bounded_regular_file(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"x" * 10)
    assert read_bounded(p, 10) == b"x" * 10
    with pytest.raises(TooLarge, match="10 bytes; the limit is 9 bytes"):
        read_bounded(p, 9)


def test_read_bounded_pipe(tmp_path):
    """A FIFO with more data than the limit is refused after limit + 1 bytes."""
    fifo = tmp_path / "in"
    os.mkfifo(fifo)
    writer = subprocess.Popen([sys.executable, "-c", f"import sys\nwith open({str(fifo)!r}, "
                               "'wb') as f:\n  try:\n    f.write(b'y' * 5_000_000)\n  except "
                               "BrokenPipeError:\n    pass"], stderr=subprocess.DEVNULL)
    try:
        with pytest.raises(TooLarge):
            read_bounded(fifo, 4096)
    finally:
        writer.wait(timeout=30)


@pytest.mark.parametrize("args", [
    ("check", STATION, "/dev/zero"),
    ("check", "/dev/zero", WALL),
    ("check", STATION, "-"),
    ("diagnose", STATION, "/dev/zero", "/dev/zero"),
    ("check-plan", STATION, "/dev/zero"),
    ("sim", STATION, WALL, "--plan", "/dev/zero"),
])
def test_devices_and_stdin_are_bounded(cli, args):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-m", "cellspec", *map(str, args)], stdin=open(
        "/dev/zero", "rb"), capture_output=True, text=True, timeout=60, env=env, check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "more than" in r.stderr or "larger than" in r.stderr


def test_stdin_layout_is_read(cli):
    r = cli("check", STATION, "-", stdin=WALL.read_text())
    assert r.returncode == 0 and r.stdout.startswith("pass")


def test_test_block_layout_on_a_device(cli, tmp_path):
    text = STATION.read_text().split("\ntest ", 1)[0]
    cell = tmp_path / "t.cell"
    cell.write_text(text + '\ntest dev {\n    layout "/dev/zero"\n    expect pass\n}\n')
    r = cli("test", cell)
    assert r.returncode == 2 and "more than" in r.stderr and "Traceback" not in r.stderr


# --- outputs ---------------------------------------------------------------------------
def test_atomic_write_keeps_the_mode(tmp_path):
    for mode in (0o644, 0o755, 0o600):
        p = tmp_path / f"f{mode:o}"
        p.write_text("old")
        os.chmod(p, mode)
        atomic_write(p, "new\n")
        assert p.read_text() == "new\n" and stat.S_IMODE(p.stat().st_mode) == mode


def test_atomic_write_new_file_honours_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "n", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "n").stat().st_mode) == 0o640
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "m", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "m").stat().st_mode) == 0o644


def test_atomic_write_follows_a_symlink(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    os.chmod(real, 0o640)
    link = tmp_path / "link.json"
    link.symlink_to(real.name)
    atomic_write(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


def test_atomic_write_refuses_a_fifo_and_a_folder(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(cellspec.CellspecError, match=r"pipe: is a FIFO"):
        atomic_write(fifo, "x")
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    with pytest.raises(cellspec.CellspecError, match="is a directory"):
        atomic_write(tmp_path, "x")


def test_atomic_write_char_device_in_place():
    atomic_write("/dev/null", "x")  # stays a device (this would have replaced it)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    if os.path.exists("/dev/full"):
        with pytest.raises(cellspec.CellspecError, match="cannot write /dev/full"):
            atomic_write("/dev/full", "x")


def test_cli_output_to_fifo_is_refused_before_the_work(cli, tmp_path):
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    r = cli("plan", STATION, WALL, "-o", fifo)
    assert r.returncode == 2 and f"-o {fifo}: is a FIFO" in r.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_cli_junit_xml_to_a_0755_file_keeps_it(cli, tmp_path):
    out = tmp_path / "report.xml"
    out.write_text("")
    os.chmod(out, 0o755)
    r = cli("test", STATION, "--junit-xml", out)
    assert r.returncode == 0 and "<testsuites" in out.read_text()
    assert stat.S_IMODE(out.stat().st_mode) == 0o755


def test_fmt_on_a_symlinked_rule_file_formats_the_real_file(cli, tmp_path):
    real = tmp_path / "real.cell"
    real.write_text('rule   r "m" :   forall p: p.x < 1\n')
    os.chmod(real, 0o644)
    link = tmp_path / "link.cell"
    link.symlink_to(real)
    r = cli("fmt", link)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and real.read_text() == 'rule r "m" : forall p: p.x < 1\n'
    assert stat.S_IMODE(real.stat().st_mode) == 0o644


def test_witness_to_dev_null(cli, tmp_path):
    lay = tmp_path / "l.json"
    lay.write_text(json.dumps({"parts": [{"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025]},
                                         {"id": "b", "type": "cube",
                                          "pos": [0.45, 0.2, 0.025]}]}))
    r = cli("check", STATION, lay, "--robust", "0.001", "--witness", "/dev/null")
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_check_writable_names_missing_folder(tmp_path):
    from cellspec.core.io import check_writable

    with pytest.raises(cellspec.CellspecError, match="no such directory"):
        check_writable(str(tmp_path / "nope" / "x.json"))
    check_writable("/dev/null")
    check_writable(str(tmp_path / "new.json"))
    assert not Path(tmp_path / "new.json").exists()

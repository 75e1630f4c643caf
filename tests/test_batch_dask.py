"""cellspec batch and cellspec test on Dask: a real ``dask scheduler`` and two ``dask worker``
processes on 127.0.0.1 (started here, torn down after), an embedded LocalCluster, a worker
killed in the middle of a batch, a layout that crashes its worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, STATION, run_cellspec
from test_batch import tower

from cellspec.cli import main
from cellspec.core.proc import preexec_die_with_parent

distributed = pytest.importorskip("distributed")

CRASH_ID = "crash-me"  # the workers started here kill themselves on this layout id


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return env


class Cluster:
    """A scheduler and worker processes on 127.0.0.1, each in its own process group."""

    def __init__(self, tmp: Path):
        self.tmp, self.env = tmp, _env()
        self.env["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] = "1"
        self.procs: list[subprocess.Popen] = []
        try:
            self._start_all(tmp)
        except BaseException:  # a failed start, or the run stopped (SIGTERM) meanwhile
            self.close()
            raise

    def _start_all(self, tmp: Path) -> None:
        sched_file = tmp / "scheduler.json"
        self.scheduler = self._start(["scheduler", "--host", "127.0.0.1", "--port", "0",
                                      "--no-dashboard", "--scheduler-file", str(sched_file)],
                                     "scheduler")
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.address = json.loads(sched_file.read_text())["address"]
        assert self.address.startswith("tcp://127.0.0.1:")
        wenv = dict(self.env, CELLSPEC_BATCH_CRASH_ID=CRASH_ID)
        self.workers = [self._start(["worker", self.address, "--nthreads", "1", "--host",
                                     "127.0.0.1", "--no-dashboard", "--name", f"w{k}"],
                                    f"worker{k}", wenv) for k in range(2)]
        with distributed.Client(self.address, timeout=30, set_as_default=False) as c:
            c.wait_for_workers(2, timeout=90)

    def _start(self, args: list[str], name: str, env: dict | None = None) -> subprocess.Popen:
        log = (self.tmp / f"{name}.log").open("w")
        p = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_" + args[0],
                              *args[1:]], stdout=log, stderr=subprocess.STDOUT,
                             env=env or self.env, cwd=self.tmp, start_new_session=True,
                             preexec_fn=preexec_die_with_parent)
        self.procs.append(p)
        return p

    def kill(self, p: subprocess.Popen) -> None:
        """SIGKILL the whole process group (the nanny and its worker process)."""
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=30)

    def close(self) -> None:
        for p in reversed(self.procs):
            self.kill(p)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("dask"))
    try:
        yield c
    finally:
        c.close()


def _layouts(tmp: Path, n: int, name: str = "many.jsonl", crash_at: int | None = None) -> Path:
    p = tmp / name
    with p.open("w") as fh:
        for k in range(n):
            ident = CRASH_ID if k == crash_at else f"L{k}"
            fh.write(json.dumps(tower(5 + k % 11, float_top=k % 3 == 0, ident=ident)) + "\n")
    return p


def _serial(capsys, src: Path) -> list[dict]:
    main(["batch", str(STATION), str(src), "--serial", "--no-timings"])
    return [json.loads(x) for x in capsys.readouterr().out.splitlines()]


def test_external_cluster_batch_and_test_identical_to_local(cluster, capsys, tmp_path,
                                                           monkeypatch):
    monkeypatch.chdir(REPO)  # both runs show paths relative to the repository
    src = _layouts(tmp_path, 30)
    want = _serial(capsys, src)
    res = run_cellspec("batch", STATION, src, "--scheduler", cluster.address, "--no-timings",
                       "--chunk", "4")
    assert res.returncode == 1, res.stderr  # some layouts fail gravity
    assert [json.loads(x) for x in res.stdout.splitlines()] == want
    assert res.stderr.strip().splitlines()[-1] == "20 pass, 10 fail, 0 unknown, 0 bad input"
    rules = [str(REPO / "rules" / p) for p in ("cells/sort_cubes.cell",
                                                "scenarios/table_vi_01_workspace_boundary.cell",
                                                "scenarios/table_vi_02_height_limit.cell")]
    remote = run_cellspec("test", *rules, "--scheduler", cluster.address, "--junit-xml",
                          tmp_path / "remote.xml")
    assert main(["test", *rules, "--junit-xml", str(tmp_path / "local.xml")]) == 0
    local = capsys.readouterr().out
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == local and "12 passed, 0 failed" in local
    assert (tmp_path / "remote.xml").read_bytes() == (tmp_path / "local.xml").read_bytes()


@pytest.mark.slow
def test_layout_crashing_its_worker_is_an_error_for_that_layout(cluster, capsys, tmp_path):
    src = _layouts(tmp_path, 12, crash_at=4)
    res = run_cellspec("batch", STATION, src, "--scheduler", cluster.address, "--no-timings",
                       "--chunk", "3", timeout=300)
    recs = [json.loads(x) for x in res.stdout.splitlines()]
    assert [r["id"] for r in recs] == [f"L{k}" if k != 4 else CRASH_ID for k in range(12)]
    crashed = recs.pop(4)
    assert crashed["verdict"] == "error" and "worker running it died" in crashed["error"]
    want = _serial(capsys, src)
    del want[4]
    assert recs == want  # its chunk-mates were re-run alone and are all there
    assert "1 error" in res.stderr and res.returncode == 3


def test_killed_worker_loses_and_duplicates_nothing(cluster, capsys, tmp_path):
    src = _layouts(tmp_path, 100)
    want = _serial(capsys, src)
    p = subprocess.Popen([sys.executable, "-m", "cellspec", "batch", str(STATION), str(src),
                          "--scheduler", cluster.address, "--no-timings", "--chunk", "4",
                          "--stats"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=_env(), cwd=REPO)
    assert p.stdout is not None
    lines = []
    for line in p.stdout:
        lines.append(line)
        if len(lines) == 4:  # mid-batch: kill one worker (nanny and worker process)
            cluster.kill(cluster.workers[0])
    err = p.stderr.read() if p.stderr else ""
    assert p.wait(timeout=300) == 1, err
    assert len(lines) == 100
    assert [json.loads(x) for x in lines] == want  # complete, in order, no duplicates
    stats = json.loads(err.strip().splitlines()[-1])
    assert stats["layouts"] == 100 and stats["workers"] == 1  # one worker left at the end


@pytest.mark.slow
def test_local_cluster_two_workers_identical_to_serial(capsys, tmp_path):
    src = _layouts(tmp_path, 24)
    want = _serial(capsys, src)
    res = run_cellspec("batch", STATION, src, "--workers", "2", "--no-timings", "--stats")
    assert res.returncode == 1, res.stderr
    assert [json.loads(x) for x in res.stdout.splitlines()] == want
    stats = json.loads(res.stderr.strip().splitlines()[-1])
    assert stats["workers"] == 2 and len(stats["worker_peak_bytes"]) == 2
    assert all(b < 1 << 30 for b in stats["worker_peak_bytes"].values())


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (children, grandchildren, ...), from /proc."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat", encoding="ascii", errors="replace") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parent[int(d)] = int(fields[1])
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out.update(kids)
        todo.extend(kids)
    return out


@pytest.mark.skipif(os.environ.get("CELLSPEC_HOLD_CLUSTER") != "1",
                    reason="only inside test_sigterm_leaves_no_dask_process")
def test_hold_cluster(cluster):
    time.sleep(300)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_leaves_no_dask_process(tmp_path):
    """A test run ended by SIGTERM stops the scheduler and the workers it started (issue
    31: they were left running with parent 1)."""
    env = dict(_env(), CELLSPEC_HOLD_CLUSTER="1")
    p = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p",
                          "no:cacheprovider", f"{Path(__file__)}::test_hold_cluster"],
                         cwd=REPO, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the scheduler, 2 nannies, 2 worker processes
            seen |= _descendants(p.pid)
            if len(seen) >= 5:
                break
            time.sleep(0.5)
        assert len(seen) >= 5, seen
        time.sleep(1)
        seen |= _descendants(p.pid)
        p.send_signal(signal.SIGTERM)
        p.wait(60)
        end = time.monotonic() + 30
        while time.monotonic() < end and seen & _all():
            time.sleep(0.2)
        left = sorted(seen & _all())
        assert not left, f"left running after SIGTERM: {left}"
    finally:
        p.kill()
        p.wait(30)
        for q in seen:
            try:
                os.kill(q, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _all() -> set[int]:
    """The pids running now (zombies excluded)."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat", encoding="ascii", errors="replace") as fh:
                    if fh.read().rsplit(")", 1)[1].split()[0] != "Z":
                        out.add(int(d))
            except OSError:
                pass
    return out


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_batch_leaves_no_local_cluster_process(tmp_path):
    """The embedded LocalCluster's worker processes end with `cellspec batch` (Dask's
    nanny pipe; a guard, issue 31)."""
    src = _layouts(tmp_path, 3000)
    p = subprocess.Popen([sys.executable, "-m", "cellspec", "batch", str(STATION), str(src),
                          "--workers", "2"], cwd=REPO, env=_env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(seen) < 2:
            seen |= _descendants(p.pid)
            time.sleep(0.5)
        assert len(seen) >= 2, seen
        time.sleep(2)
        seen |= _descendants(p.pid)
        p.kill()
        p.wait(30)
        end = time.monotonic() + 20
        while time.monotonic() < end and seen & _all():
            time.sleep(0.2)
        assert not seen & _all(), f"left running after kill -9: {sorted(seen & _all())}"
    finally:
        p.kill()
        p.wait(30)
        for q in seen & _all():
            try:
                os.kill(q, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

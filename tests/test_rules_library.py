"""The rule library under rules/: every test block passes, and the generated layouts are
reproducible byte for byte from rules/layouts/make_layouts.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "rules"
LAYOUTS = RULES / "layouts"

# Test blocks written per file; the library may grow, never shrink silently.
MIN_TESTS = {
    "rules/scenarios/table_v.cell": 19,
    "rules/stdlib/physical_tests.cell": 56,
    "rules/scenarios/reach.cell": 3,
}


@pytest.fixture(scope="module")
def library_run() -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "cellspec", "test", "rules/", "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr}"
    return json.loads(proc.stdout)


def test_every_rule_test_passes(library_run: dict) -> None:
    assert library_run["errors"] == []
    failed = [t for t in library_run["tests"] if t["status"] != "passed"]
    assert not failed, "\n".join(f"{t['id']}: {t['message']} (expected {t['expected']}, "
                                 f"actual {t['actual']})" for t in failed)
    assert library_run["failed"] == 0
    assert library_run["passed"] == len(library_run["tests"])


@pytest.mark.parametrize("path", sorted(MIN_TESTS))
def test_library_file_runs_all_its_tests(library_run: dict, path: str) -> None:
    ran = [t for t in library_run["tests"] if t["file"] == path]
    assert len(ran) >= MIN_TESTS[path], f"{path}: {len(ran)} tests ran"


def test_library_total_count(library_run: dict) -> None:
    assert len(library_run["tests"]) >= sum(MIN_TESTS.values())


def test_layouts_regenerate_identically(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(LAYOUTS / "make_layouts.py"), "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    fresh = sorted(p.name for p in tmp_path.glob("*.json"))
    committed = sorted(p.name for p in LAYOUTS.glob("*.json"))
    assert fresh, "the generator wrote no layouts"
    assert fresh == committed
    for name in fresh:
        assert (tmp_path / name).read_bytes() == (LAYOUTS / name).read_bytes(), name


def test_layouts_are_valid_json_with_orders() -> None:
    for path in sorted(LAYOUTS.glob("*.json")):
        obj = json.loads(path.read_text(encoding="utf-8"))
        ids = [p["id"] for p in obj["parts"]]
        assert obj["units"] == "m"
        assert len(ids) >= 9, path.name
        assert sorted(obj["order"]) == sorted(ids), path.name

"""Shared fixtures: repository paths, loaded cells and a CLI runner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
STATION = REPO / "rules" / "cells" / "dual_arm_station.cell"
FEATURES = DATA / "features.cell"
LAYOUTS = REPO / "rules" / "layouts"


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    """A run ended by SIGTERM tears its fixtures down as Ctrl-C does (issue 31: the Dask
    scheduler and workers of test_batch_dask were left running with parent 1)."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)


def examples(n: int) -> int:
    """Hypothesis examples for a wide differential test: all ``n`` when the slow tests run
    (CELLSPEC_SLOW=1, as `.ci/run` does with it), half in the lean default run."""
    return n if os.environ.get("CELLSPEC_SLOW") == "1" else max(1, n // 2)


def write_cell(tmp_path_factory: pytest.TempPathFactory, text: str,
               name: str = "c.cell") -> Path:
    """A cell text written to a fresh temporary directory (a test's own cell): its path."""
    f = tmp_path_factory.mktemp(Path(name).stem) / name
    f.write_text(text)
    return f


def run_cellspec(*args: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None,
                 timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``python -m cellspec ARGS`` and capture text output."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("CELLSPEC_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "cellspec", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd or REPO, env=env,
                          timeout=timeout, check=False)


@pytest.fixture(scope="session")
def cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """The CLI runner: ``cli("check", cell, layout, "--format", "json")``."""
    return run_cellspec


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def station_path() -> Path:
    return STATION


@pytest.fixture(scope="session")
def station_cell():
    import cellspec

    return cellspec.load_cell(str(STATION))


@pytest.fixture(scope="session")
def features_cell():
    import cellspec

    return cellspec.load_cell(str(FEATURES))

"""`severity preference [weight W]`: parsed into Rule.weight, bad weights named at their line."""

from __future__ import annotations

from pathlib import Path

import pytest

import cellspec
from cellspec.core.errors import CellspecError

CELL = """
cell c {
    units m
    workspace x [0, 1] y [0, 1] z [0, 1]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
}
"""


def _load(tmp_path: Path, rules: str) -> cellspec.dsl.model.Cell:
    p = tmp_path / "t.cell"
    p.write_text(CELL + rules, encoding="utf-8")
    return cellspec.load_cell(str(p))


def _errors(tmp_path: Path, rules: str) -> list[str]:
    with pytest.raises(CellspecError) as info:
        _load(tmp_path, rules)
    return [str(d) for d in info.value.diagnostics]


def test_weight_and_default(tmp_path: Path) -> None:
    cell = _load(tmp_path,
                 'rule low "{p} high" severity preference weight 3 : forall p: p.z <= 0.1\n'
                 'rule near "{p} far" severity preference : forall p: p.x <= 0.3\n'
                 'rule hard "{p} out" : forall p: p.x <= 0.9\n')
    got = {r.name: (r.severity, r.weight) for r in cell.rules}
    assert got == {"low": ("preference", 3), "near": ("preference", 1), "hard": ("error", 1)}


@pytest.mark.parametrize(("header", "says"), [
    ("severity preference weight 0", "rule low: weight must be a positive whole number, not 0"),
    ("severity preference weight 2.5", "rule low: weight must be a positive whole number, not 2.5"),
    ("severity preference weight -1", "rule low: weight must be a positive whole number, not -1"),
    ("severity warning weight 2",
     "rule low: `weight` applies only to `severity preference` (this rule is warning)"),
])
def test_bad_weight_is_named_at_its_line(tmp_path: Path, header: str, says: str) -> None:
    errs = _errors(tmp_path, f'rule low "{{p}} high" {header} : forall p: p.z <= 0.1\n')
    assert len(errs) == 1 and errs[0].endswith(says), errs
    assert ":8:1:" in errs[0], errs

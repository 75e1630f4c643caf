"""Seeded fault layouts shared by the formal tools' tests and benchmarks (``explain`` at
scale): a grid of cube towers, and faults injected into it. Plain layout JSON objects."""

from __future__ import annotations

import json
from typing import Any

import numpy as np


def tower_grid(cols: int, rows: int, height: int, gap: float = 0.01) -> dict[str, Any]:
    """cols x rows towers of ``height`` 5 cm cubes, ``gap`` apart, from (0.1, 0.1) on the
    table; ids ``c{i}_{j}_{k}``, the order bottom-up."""
    parts = []
    for i in range(cols):
        for j in range(rows):
            for k in range(height):
                parts.append({"id": f"c{i}_{j}_{k}", "type": "cube",
                              "pos": [round(0.1 + i * (0.05 + gap), 4),
                                      round(0.1 + j * (0.05 + gap), 4),
                                      round(0.025 + 0.05 * k, 4)]})
    return {"parts": parts, "order": [p["id"] for p in sorted(parts, key=lambda p: p["pos"][2])]}


def inject_faults(obj: dict[str, Any], k: int, seed: int = 0) -> dict[str, Any]:
    """A copy of ``obj`` with k distinct parts broken (seeded): lifted 1 cm (floats), pushed
    4 cm into its neighbour (overlap), or moved 0.5 m towards -y (out of the cell)."""
    rng = np.random.default_rng(seed)
    obj = json.loads(json.dumps(obj))
    for idx in rng.choice(len(obj["parts"]), k, replace=False):
        p = obj["parts"][int(idx)]
        kind = int(rng.integers(0, 3))
        if kind == 0:
            p["pos"][2] = round(p["pos"][2] + 0.01, 4)
        elif kind == 1:
            p["pos"][0] = round(p["pos"][0] + 0.04, 4)
        else:
            p["pos"][1] = round(p["pos"][1] - 0.5, 4)
    return obj


def fault_layout(faults: int = 40, seed: int = 0) -> dict[str, Any]:
    """The 200-part explain workload: 10 x 10 towers of two cubes, 1.5 cm apart, with
    ``faults`` injected faults (the figure in bench/formal.py and its test)."""
    return inject_faults(tower_grid(10, 10, 2, gap=0.015), faults, seed)

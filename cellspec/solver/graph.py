"""Connected components of an undirected graph given as an edge list (union-find).

One helper for every solver that splits a layout into independent structures
(sequencing, repair, stability) or counts joined variables (the ASP compiler).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def components(n: int, i: Iterable[int], j: Iterable[int]) -> np.ndarray:
    """Label of each node 0..n-1: nodes joined by an edge (i[k], j[k]) share a label.

    Labels are numbered 0, 1, ... in order of each component's smallest node, so the
    result is deterministic."""
    parent = list(range(n))

    def find(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for a, b in zip(i, j, strict=True):
        ra, rb = find(int(a)), find(int(b))
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    labels = np.empty(n, dtype=np.int64)
    names: dict[int, int] = {}
    for v in range(n):
        labels[v] = names.setdefault(find(v), len(names))
    return labels

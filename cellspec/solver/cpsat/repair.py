"""Minimal-change repair on the integer grid with CP-SAT: the public entry point.

The cluster pipeline (:mod:`.repair_pipeline`) does the work; its docstring gives the
model's meaning and the objective."""

from __future__ import annotations

from cellspec.dsl.model import BoxZone, HalfSpaceZone
from cellspec.solver.cpsat.blocked import parse_blocked, with_blocked
from cellspec.solver.cpsat.repair_pipeline import (
    DEFAULT_TIME_LIMIT,
    LOOP_RULES,
    pipeline,
)
from cellspec.solver.cpsat.rotate import parse_rotate

repair = pipeline

__all__ = ["repair", "with_blocked", "parse_blocked", "parse_rotate", "BoxZone",
           "HalfSpaceZone", "DEFAULT_TIME_LIMIT", "LOOP_RULES"]

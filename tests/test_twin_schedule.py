"""Dual-arm allocation and scheduling with CP-SAT (cellspec.solver.cpsat.schedule)."""

from __future__ import annotations

import pytest

from cellspec.core.errors import CellspecError
from cellspec.solver.cpsat.schedule import ArmTimes, Job, schedule


def _both(part: str, pick: float = 1.0, place: float = 1.0, shared: bool = True) -> Job:
    t = ArmTimes(pick, place, pick_shared=False, place_shared=shared)
    return Job(part, {"L": t, "R": t})


def test_parallel_arms_halve_the_makespan_outside_the_shared_zone():
    jobs = [_both(f"p{k}", shared=False) for k in range(4)]
    r = schedule(jobs, ["L", "R"])
    assert r.status == "optimal"
    assert r.makespan == pytest.approx(4.0)
    assert r.best_single == pytest.approx(8.0)
    assert r.speedup == pytest.approx(2.0)
    assert sorted(s.arm for s in r.slots) == ["L", "L", "R", "R"]


def test_shared_zone_serialises_the_place_phases():
    jobs = [_both(f"p{k}") for k in range(4)]
    r = schedule(jobs, ["L", "R"])
    assert r.status == "optimal"
    # four place phases of 1 s can never overlap; the first pick cannot overlap anything
    assert r.makespan == pytest.approx(5.0)
    places = sorted((s.place_start, s.end) for s in r.slots)
    for (_, a1), (b0, _) in zip(places, places[1:], strict=False):
        assert a1 <= b0 + 1e-9
    assert r.speedup == pytest.approx(8.0 / 5.0)


def test_precedences_hold_and_infeasible_arm_is_never_chosen():
    jobs = [Job("a", {"L": ArmTimes(1, 1, place_shared=False)}),
            Job("b", {"L": ArmTimes(1, 1, place_shared=False),
                      "R": ArmTimes(1, 1, place_shared=False)}),
            Job("c", {"R": ArmTimes(1, 1, place_shared=False)})]
    r = schedule(jobs, ["L", "R"], [("a", "c"), ("b", "c")])
    assert r.status == "optimal"
    slot = {s.part: s for s in r.slots}
    assert slot["a"].arm == "L" and slot["c"].arm == "R"
    assert slot["c"].place_start >= max(slot["a"].end, slot["b"].end) - 1e-9
    assert r.single_arm == {"L": None, "R": None}
    assert r.speedup is None


def test_no_arm_can_place_a_part():
    r = schedule([Job("a", {})], ["L", "R"])
    assert r.status == "infeasible" and "a" in r.reason


def test_unknown_names_are_bad_input():
    with pytest.raises(CellspecError, match="unknown part"):
        schedule([_both("a")], ["L", "R"], [("a", "zz")])
    with pytest.raises(CellspecError, match="unknown arm"):
        schedule([Job("a", {"Q": ArmTimes(1, 1)})], ["L", "R"])


def test_deterministic():
    jobs = [_both(f"p{k}", pick=1 + k / 10, place=0.5 + k / 7) for k in range(6)]
    a = schedule(jobs, ["L", "R"], [("p0", "p3"), ("p1", "p4")]).to_json()
    b = schedule(jobs, ["L", "R"], [("p0", "p3"), ("p1", "p4")]).to_json()
    assert a == b

"""The task-relevant subgraph of an action (`cellspec world context`): the exact subgraph on
a hand-built world, full recall of what the diagnose rules read on a real run,
determinism, bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cellspec.core.errors import CellspecError
from cellspec.dsl.parser import load_cell
from cellspec.layout import load_layout
from cellspec.world import context as wc
from cellspec.world.db import Entity, Transition, WorldRelation, open_world
from cellspec.world.reads import commit_reads, diagnose_reads
from cellspec.world.run import Fault, run_layout
from tests.conftest import REPO, STATION, run_cellspec

C = (0.05, 0.05, 0.05)


def _world(path: Path) -> Path:
    """A hand-built world: a tower b1<b2 at x 0.4, a cube a1 far off, c1 held by the
    gripper, d1 at the feeder; the current task places c1 on b2."""
    with open_world(path, create=True, cell="hand") as w:
        w.set_tasks([{"node": "pick:c1", "action": "pick", "part": "c1", "status": "done"},
                     {"node": "place:c1", "action": "place", "part": "c1",
                      "target": "0.4000,0.2000,0.1250", "deps": ["pick:c1"]},
                     {"node": "pick:d1", "action": "pick", "part": "d1",
                      "deps": ["place:c1"]}])
        ents = [Entity("a1", "cube", (0.1, 0.5, 0.025), C),
                Entity("b1", "cube", (0.4, 0.2, 0.025), C),
                Entity("b2", "cube", (0.4, 0.2, 0.075), C, confidence=0.6,
                       lifecycle="Uncertain"),
                Entity("c1", "cube", (0.6, 0.3, 0.2), C),
                Entity("d1", "cube", (0.3, -0.2, 0.025), C),
                Entity("e1", "cube", (0.45, 0.2, 0.025), C)]
        rels = [WorldRelation("holding", "gripper", "c1"), WorldRelation("near", "b1", "e1"),
                WorldRelation("on", "a1", "table"), WorldRelation("on", "b1", "table"),
                WorldRelation("on", "b2", "b1"), WorldRelation("on", "d1", "table"),
                WorldRelation("on", "e1", "table")]
        w.transition(Transition(action="init", part="*", upserts=ents, relations=rels,
                                cs=("holding", "c1")))
    return path


def test_exact_subgraph_of_a_place(tmp_path: Path) -> None:
    db = _world(tmp_path / "w.db")
    with open_world(db) as w:
        act = wc.find_action(w, None)  # the current task
        assert act.node == "place:c1"
        ctx = wc.extract(w, act)
        # the part (hop 0), b2 in the target's zone (it supports the target), b2's
        # support on(b2, b1) as a support relation; a1, d1, e1 and their table relations out
        assert ctx.text() == (
            "# place:c1 -> 0.400,0.200,0.125 (pending) | cs holding c1\n"
            "b2 cube 0.400,0.200,0.075 conf 0.60 Uncertain\n"
            "c1 cube 0.600,0.300,0.200 conf 1.00 Active\n"
            "holding(gripper, c1) conf 1.00 Active\n"
            "on(b2, b1) conf 0.60 Uncertain\n")
        bare = wc.extract(w, act, zone="none", hops=0, supports=False)
        assert [str(r) for r, _, _ in bare.relations] == ["holding(gripper, c1)"]
        assert [e.id for e, _ in bare.entities] == ["c1"]
        # pick d1: the table is a hub, so hops do not spread through it
        pick = wc.extract(w, wc.find_action(w, "pick:d1"), hops=3, supports=False)
        assert [e.id for e, _ in pick.entities] == ["d1"]
        assert [str(r) for r, _, _ in pick.relations] == ["on(d1, table)"]
        # hops walk part-to-part relations: from b1 one hop reaches b2 and e1
        w.set_tasks([{"node": "pick:b1", "action": "pick", "part": "b1"}])
        ctx = wc.extract(w, wc.find_action(w, "pick:b1"), zone="none", hops=1,
                         supports=False)
        assert sorted(e.id for e, _ in ctx.entities) == ["b1", "b2", "e1"]
        assert [str(r) for r, _, _ in ctx.relations] == [
            "near(b1, e1)", "on(b1, table)", "on(b2, b1)", "on(e1, table)"]
        whole = wc.whole(w, act)
        assert len(whole.relations) == 7 and len(whole.entities) == 6
        # a token budget drops the least relevant lines, never the part
        assert wc.count_tokens(wc.extract(w, act).text()) == 54
        small = wc.extract(w, act, max_tokens=50)  # b2 (zone only) goes, with on(b2, b1)
        assert small.text() == (
            "# place:c1 -> 0.400,0.200,0.125 (pending) | cs holding c1 | 2 line(s) dropped "
            "to fit\n"
            "c1 cube 0.600,0.300,0.200 conf 1.00 Active\n"
            "holding(gripper, c1) conf 1.00 Active\n")
        assert wc.count_tokens(small.text()) == 42
        # a budget the part alone exceeds: the part and its relation stay
        assert wc.extract(w, act, max_tokens=5).text() == small.text()


def test_cli_context_is_deterministic_and_bad_input_exits_2(tmp_path: Path) -> None:
    db = _world(tmp_path / "w.db")
    a = run_cellspec("world", "context", db, "--action", "place:c1", "--format", "json")
    b = run_cellspec("world", "context", db, "--action", "place:c1", "--format", "json")
    assert a.returncode == 0 and a.stdout == b.stdout
    db2 = _world(tmp_path / "w2.db")  # built the same way: byte-identical context
    t1 = run_cellspec("world", "context", db, "--action", "place:c1")
    t2 = run_cellspec("world", "context", db2, "--action", "place:c1")
    assert t1.returncode == 0 and t1.stdout == t2.stdout
    assert t1.stdout.startswith("# place:c1 ")
    for args, msg in ((("--action", "place:zz"), "no action 'place:zz'"),
                      (("--action", "place:c1", "--hops", "-1"), "--hops must be"),
                      (("--action", "place:c1", "--max-tokens", "0"), "--max-tokens"),
                      (("--action", "place:c1", "--zone", "moon"), "invalid choice")):
        r = run_cellspec("world", "context", db, *args)
        assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not sqlite at all\n" * 10)
    r = run_cellspec("world", "context", bad, "--action", "pick:c1")
    assert r.returncode == 2 and "not a world database" in r.stderr
    r = run_cellspec("world", "relations", db, "--hops", "2", "--action", "pick:c1")
    assert r.returncode == 2 and "only `world context`" in r.stderr


class _Reads:
    """Observer: the default context before each action, the reads after its diagnosis."""

    def __init__(self, cell: Any) -> None:
        self.cell, self.rows, self.ctx = cell, [], None

    def before(self, label: str, kind: str, part: str, world: Any) -> None:
        act = wc.find_action(world, f"{kind}:{part}")
        self.ctx = ({r for r, _, _ in wc.extract(world, act).relations},
                    set(world.relations()),
                    {r for r, _, _ in wc.extract(world, act, supports=False).relations})

    def diagnosed(self, label: str, kind: str, part: str, dg: Any) -> None:
        ctx, graph, bare = self.ctx
        reads = diagnose_reads(self.cell, dg.delta.facts())
        self.rows.append((label, {r for r in graph if any(x.matches(r) for x in reads)},
                          ctx, bare))


def test_default_context_holds_every_relation_the_rules_read_on_a_run() -> None:
    cell = load_cell(STATION)
    layout = load_layout(REPO / "rules" / "world" / "tower_row.json")
    obs = _Reads(cell)
    r = run_layout(cell, layout, None, faults=(Fault("slip", 3), Fault("moved", 7)), seed=0,
                   engine="gripper", order=tuple(layout.order), observer=obs)
    assert r.success
    read = [row for row in obs.rows if row[1]]
    # the moved part's support is read, and it is in the graph before the action
    assert {str(x) for row in read for x in row[1]} >= {"on(c2, c1)"}
    missed = [(lab, sorted(map(str, rd - ctx))) for lab, rd, ctx, _ in read if rd - ctx]
    assert missed == []  # recall 100 %
    # without the support relations the moved part's support (far from the action) is missed
    assert any(rd - bare for _, rd, _, bare in read)
    assert commit_reads(cell, "pick")[0] == () and commit_reads(cell, "place")[0] == ()


def test_action_errors_name_the_actions(tmp_path: Path) -> None:
    db = _world(tmp_path / "w.db")
    with open_world(db) as w:
        with pytest.raises(CellspecError, match="pick:c1, place:c1, pick:d1"):
            wc.find_action(w, "place:x")
        with pytest.raises(CellspecError, match="hops"):
            wc.extract(w, wc.find_action(w, None), hops=True)  # type: ignore[arg-type]
    empty = tmp_path / "e.db"
    open_world(empty, create=True, cell="x").close()
    with open_world(empty) as w, pytest.raises(CellspecError, match="no tasks"):
        wc.find_action(w, None)


# -- the prompts that use it ---------------------------------------------------------------
def test_design_prompt_holds_the_context_not_the_whole_graph(tmp_path: Path) -> None:
    pytest.importorskip("openai")
    from cellspec.agent.openai_adapter import OpenAIAdapter, parse_spec
    from tests.test_llm_openai import ASK, GOOD, LINE, TOWER, FakeServer

    db = _world(tmp_path / "w.db")
    text, rec = wc.prompt_context(str(db))
    assert rec["action"] == "place:c1" and rec["tokens"] < rec["whole_graph_tokens"]
    cell = load_cell(STATION)
    server = FakeServer()
    try:
        server.line(LINE)
        server.ok(GOOD)
        a = OpenAIAdapter("fake-model", base_url=server.url, api_key="dummy", max_retries=0,
                          timeout=5.0)
        a.world_context = text
        a.translate_mode, a.propose_mode = "model", "always"
        assert a.translate(ASK, cell) == TOWER
        a.propose(parse_spec(TOWER), cell, None)
    finally:
        server.close()
    for body in server.requests:
        user = body["messages"][-1]["content"]
        assert "on(b2, b1) conf 0.60 Uncertain" in user and "holding(gripper, c1)" in user
        assert "on(a1, table)" not in user and "d1 cube" not in user  # not the whole graph


def test_design_world_refusals(tmp_path: Path) -> None:
    db = _world(tmp_path / "w.db")
    r = run_cellspec("design", "a 2-cube tower", "--cell", STATION, "--adapter", "offline",
                     "--world", db)
    assert r.returncode == 2 and "has no prompt" in r.stderr
    r = run_cellspec("design", "a 2-cube tower", "--cell", STATION, "--adapter", "offline",
                     "--world-action", "pick:c1")
    assert r.returncode == 2 and "needs --world" in r.stderr


def test_dialog_prompt_holds_the_context(tmp_path: Path) -> None:
    pytest.importorskip("pybullet")
    from cellspec.agent.dialog import run_episode
    from cellspec.agent.dialog_agents import OfflineAgents

    class Seen(OfflineAgents):
        def __init__(self) -> None:
            super().__init__()
            self.systems: list[str] = []

        def respond(self, view: Any) -> str:
            self.systems.append(view.system)
            return super().respond(view)

    db = _world(tmp_path / "w.db")
    text, _ = wc.prompt_context(str(db), "place:c1")
    ag = Seen()
    cell = load_cell(REPO / "rules" / "cells" / "sort_cubes.cell")
    run_episode(cell, ag, rounds=1, replans=1, world=text)
    assert ag.systems and all(f"[World Model]\n{text}" in s for s in ag.systems)
    assert all("on(a1, table)" not in s for s in ag.systems)


def test_the_verb_states_the_modules_defaults() -> None:
    from cellspec.commands import world as cmd

    assert cmd.ZONES == wc.ZONES and cmd.DEFAULT_ZONE == wc.DEFAULT_ZONE
    assert (cmd.DEFAULT_HOPS, cmd.MAX_HOPS) == (wc.DEFAULT_HOPS, wc.MAX_HOPS)

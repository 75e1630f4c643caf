"""RoCo's dialectic collaboration on Sort Cubes: one agent per robot talks until EXECUTE.

Transcribed from RoCo (github.com/MandiZhao/robot-collab, commit 9943870):
``prompting/dialog_prompter.py`` (``compose_system_prompt``, ``prompt_one_round``,
``prompt_one_dialog_round``, ``post_execute_update``), the Sort task's prompts
(``rocobench/envs/task_sort.py``: ``SORTING_ACTION_SPACE``, ``get_agent_prompt``,
``describe_cube_state``, ``describe_robot_state``, ``sample_initial_scene``) and the runner
(``run_dialog.py``: ``--tsteps 10``, ``--num_replans 5``, ``max_calls_per_round 10``, history
and feedback on). Per environment step (a round): the agents speak in turn (Alice, Bob,
Chad, Alice, ...), each with its own prompt and view, until one says EXECUTE after everyone
has spoken (or, in a re-plan, at once); the plan is checked (``RocoChecker``: RoCo's checks,
then cellspec's); on failure the feedback goes into every agent's prompt and they re-plan,
up to ``replans`` times; a valid plan is executed in the twin (``roco_exec``). The episode
ends when every cube is on its goal panel or the rounds run out.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from cellspec.agent.base import BudgetExceeded, LLMUnavailable
from cellspec.agent.dialog_agents import AgentView, DialogAgents
from cellspec.core.errors import CellspecError
from cellspec.dsl.model import Cell
from cellspec.robots.roco_check import RocoChecker, RocoResult
from cellspec.robots.roco_exec import execute_plan
from cellspec.robots.roco_task import SortState, SortTask

ROUNDS = 10  # run_dialog.py --tsteps
REPLANS = 5  # run_dialog.py --num_replans
MAX_CALLS_PER_ROUND = 10  # run_dialog.py DialogPrompter(max_calls_per_round=10)
MAX_ROUNDS = 100
MAX_REPLANS = 20

ACTION_SPACE = """
[Action Options]
1) PICK <object name> PLACE <location>
2) WAIT
Only PICK an object if your gripper is empty. Target <location> for PLACE should be panel or a bin.
[Action Output Instruction]
You must first output 'EXECUTE\n', then give **exactly** one action per robot, put each on a new line.
Example: 'EXECUTE\nNAME Alice ACTION PICK red_square PLACE panel3\nNAME Bob ACTION WAIT\nNAME Chad ACTION PICK green_trapezoid PLACE panel6\n'
"""  # noqa: E501  (task_sort.py SORTING_ACTION_SPACE, verbatim)

# task_sort.py sample_initial_scene: the panels each cube shape may start on (by panel x)
START_RULES = {"square": lambda x: x > 0.15, "polygon": lambda x: x < -0.7 or x > 0.9,
               "trapezoid": lambda x: x < -0.15}


def sample_scene(task: SortTask, state: SortState, seed: int) -> SortState:
    """RoCo's ``sample_initial_scene``: each cube on a random allowed panel (seeded)."""
    rng = np.random.RandomState(seed)
    names = list(task.panels)
    far = {shape: [i for i, n in enumerate(names) if rule(float(task.panels[n].pos[0]))]
           for shape, rule in START_RULES.items()}
    centres = dict(state.centres)
    for obj in task.objects:
        shape = obj.split("_")[-1]
        if shape not in far or not far[shape]:
            continue
        idx = int(rng.choice(far[shape]))
        for idxs in far.values():
            if idx in idxs:
                idxs.remove(idx)
        centres[obj] = task.rest_centre(obj, names[idx])
    return state.with_(centres=centres)


# -- prompts (task_sort.py) ---------------------------------------------------------------
def describe_cube(task: SortTask, state: SortState, obj: str) -> str:
    """RoCo's ``describe_cube_state``."""
    c = state.centres[obj]
    for goal in sorted(set(task.cube_to_bin.values()), key=list(task.panels).index):
        p = task.panels[goal].pos
        if np.hypot(c[0] - float(p[0]), c[1] - float(p[1])) < 0.1:
            return f"{obj} is in {goal}"
    return f"{obj} is on {task.panel_of(obj, state)}"


def describe_robot(task: SortTask, state: SortState, agent: str) -> str:
    """RoCo's ``describe_robot_state``."""
    held = state.holding.get(agent)
    out = f"{agent}'s gripper is {'holding ' + held if held else 'empty'},"
    can = [o for o in task.objects if task.in_reach(agent, task.top_site(o, state))]
    cannot = [o for o in task.objects if o not in can]
    if can:
        out += " can reach cubes: " + "".join(f"{o}, " for o in can)
    if cannot:
        out += "can't reach cubes: " + "".join(f"{o}, " for o in cannot)
    return out


def agent_prompt(task: SortTask, state: SortState, agent: str) -> str:
    """RoCo's ``get_agent_prompt`` for one robot (its goal cube, reach, state)."""
    reach = [p for p in task.panels if task.in_reach(agent, task.target_pos(agent, p, state))]
    # task_sort.py cube_targets: the cube whose goal panel this robot reaches
    cube, bin_ = next(((o, g) for o, g in task.cube_to_bin.items() if g in reach),
                      next(iter(task.cube_to_bin.items())))
    others = ", ".join(a for a in task.agents if a != agent)
    cubes = "\n".join(describe_cube(task, state, o) for o in task.objects)
    me = describe_robot(task, state, agent).replace(f"{agent}'s", "Your")
    rp = ", ".join(reach)
    return f"""
7 panels on the table, ordered left to right: panel1,...,panel7. They form a straight assembly line, panel1 is closed to panel2 and farthest from panel7.
You are robot {agent} in front of {bin_}. You are collaborating with {others} to sort cubes into their target panels. The task is NOT done until all three cubes are sorted.
At current round: 
{cubes}
Your goal is to place {cube} on {bin_}, but you can only reach {rp}: this means you can only pick cubes from these panels, and can only place cubes on these panels.
{me}
Never forget you are {agent}! Never forget you can only reach {rp}!
Think step-by-step about the task and others' response. Carefully check and correct them if they made a mistake. 
Improve your plans if given [Environment Feedback].

When you respond, tell others about your goal and all constraints. Respond very concisely but informatively, and do not repeat what others have said.
Discuss with others to come up with the best plan, e.g. if your cube is out of your reach, ask others for help, and you can do the same for them. 
Propose exactly one action for yourself at the **current** round, select from [Action Options].
End your response by either: 1) output PROCEED, if the plans require further discussion, or 2) If everyone has made proposals and got approved, output EXECUTE and the final plan, must strictly follow [Action Output Instruction]!
In the plan, at least one robot should be acting, you can't all WAIT.
"""  # noqa: E501, W291  (task_sort.py get_agent_prompt, verbatim but for the names)


@dataclass
class _Memory:
    """RoCo's prompter state across rounds: round history and failed plans."""

    rounds: list[str]
    failed: list[str]


def compose_system_prompt(task: SortTask, state: SortState, agent: str, mem: _Memory,
                          chat_history: list[str], current: list[str],
                          feedback: list[str], world: str | None = None) -> str:
    """RoCo's ``compose_system_prompt``; ``world``: the task-relevant subgraph of the world
    model (``cellspec world context``), given after the agent's own prompt."""
    history = ""
    if mem.rounds:
        history = "[History]\n" + "".join(f"== Round#{i} ==\n{h}\n"
                                          for i, h in enumerate(mem.rounds))
        history += "== Current Round ==\n"
    execute = ""
    if mem.failed:
        execute = ("Plans below failed to execute, improve them to avoid collision and "
                   "smoothly reach the targets:\n" + "\n".join(mem.failed) + "\n")
    chat = "[Previous Chat]\n" + "\n".join(chat_history) if chat_history else ""
    mind = f"[World Model]\n{world}" if world else ""
    out = (f"{ACTION_SPACE}\n{history}\n{execute}{agent_prompt(task, state, agent)}\n{mind}"
           f"{chat}\n")
    if feedback:
        out += "\n".join(feedback)
    if current:
        out += "[Current Chat]\n" + "\n".join(current) + "\n"
    return out


_PROPOSAL = re.compile(r"\[Proposal\]\s*(.+)")


def _proposals(responses: list[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for agent, text in responses:
        m = _PROPOSAL.search(text)
        if m:
            out[agent] = m.group(1).strip()
    return out


# -- the loop ----------------------------------------------------------------------------
def _dialog_round(ad: DialogAgents, task: SortTask, state: SortState, mem: _Memory,
                  chat_history: list[str], feedback: list[str], replan: int,
                  failures: list, max_calls: int, world: str | None = None
                  ) -> tuple[str, str, list[dict[str, Any]]]:
    """RoCo's ``prompt_one_dialog_round``: turns until EXECUTE (after everyone spoke)."""
    said: list[tuple[str, str]] = []
    calls: list[dict[str, Any]] = []
    spoke = {a: 0 for a in task.agents}
    n = 0
    agent, response = task.agents[-1], ""
    while n < max_calls:
        done = False
        for agent in task.agents:
            current = [f"[{a}]:\n{t.strip()}" for a, t in said]
            system = compose_system_prompt(task, state, agent, mem, chat_history, current,
                                           feedback, world)
            user = f"You are {agent}, your response is:"
            if n == max_calls - 1:
                user = (f"\nYou are {agent}, this is the last call, you must end your response "
                        "by incoporating all previous discussions and output the best plan "
                        "via EXECUTE. \nYour response is:\n                    ")
            view = AgentView(agent, system, user, task, state, _proposals(said), replan,
                             failures, last_call=n == max_calls - 1,
                             everyone_spoke=all(v > 0 for a, v in spoke.items() if a != agent))
            error = None
            try:
                response = ad.respond(view)
            except (BudgetExceeded, LLMUnavailable):  # LLMUnavailable: the server (exit 2)
                raise
            except CellspecError as exc:
                error = "; ".join(d.message for d in exc.diagnostics)
                response = f"[LLM error] {error}"
            spoke[agent] += 1
            said.append((agent, response))
            calls.append({"agent": agent, "replan": replan, "call": n,
                          "prompt_chars": len(system) + len(user),
                          "prompt_sha256": hashlib.sha256((system + user).encode()).hexdigest(),
                          "response": response, "error": error})
            n += 1
            if "EXECUTE" in response and (replan > 0 or all(v > 0 for v in spoke.values())):
                done = True
                break
        if done:
            break
    return agent, response, calls


def run_episode(cell: Cell, adapter: DialogAgents, *, rounds: int = ROUNDS,
                replans: int = REPLANS, max_calls: int = MAX_CALLS_PER_ROUND,
                scene_seed: int | None = None, seed: int = 0,
                checker: RocoChecker | None = None, world: str | None = None
                ) -> dict[str, Any]:
    """One Sort Cubes episode: dialog, check, re-plan, execute; the JSON record.
    ``world``: a world-model context (``cellspec world context``) put in every prompt."""
    if not 1 <= rounds <= MAX_ROUNDS:
        raise CellspecError(f"--rounds must be from 1 to {MAX_ROUNDS}")
    if not 1 <= replans <= MAX_REPLANS:
        raise CellspecError(f"--replans must be from 1 to {MAX_REPLANS}")
    if not 1 <= max_calls <= 100:
        raise CellspecError("--max-calls-per-round must be from 1 to 100")
    own = checker is None
    ch = checker or RocoChecker(cell, seed=seed)
    try:
        task = ch.task
        if len(task.objects) == 0:
            raise CellspecError(f"cell {cell.name} has no `object` to sort")
        state = ch.initial_state()
        if scene_seed is not None:
            state = sample_scene(task, state, scene_seed)
        start = {o: task.panel_of(o, state) for o in task.objects}
        mem = _Memory([], [])
        log: list[dict[str, Any]] = []
        env_steps = 0
        outcome = "failed"
        note = None
        for step in range(rounds):
            chat: list[str] = []
            attempts: list[dict[str, Any]] = []
            try:
                result = _plan_round(ch, adapter, state, mem, chat, attempts, replans,
                                     max_calls, world)
            except BudgetExceeded as exc:
                note = "; ".join(d.message for d in exc.diagnostics)
                log.append({"round": step, "attempts": attempts, "executed": False,
                            "env_steps": 0})
                outcome = "budget"
                break
            rec: dict[str, Any] = {"round": step, "attempts": attempts, "executed": False,
                                   "env_steps": 0}
            log.append(rec)
            if result is None or not result.ok:
                continue  # RoCo: "failed to get a plan from LLM. Move on to next step."
            ex = execute_plan(ch, state, result, seed=seed + step)
            rec.update(executed=ex.ok, env_steps=ex.env_steps, execute_error=ex.reason or None)
            env_steps += ex.env_steps
            if not ex.ok:
                mem.failed.append(result.parsed.proposal)
                continue
            mem.failed = []
            mem.rounds.append("[Chat History]\n" + "\n".join(chat) + "\n[Executed Action]\n"
                              + "\n".join(f"{a}: {t.action}" for a, t in
                                          result.parsed.steps[0].items()))
            state = ex.state
            rec["scene"] = {o: describe_cube(task, state, o) for o in task.objects}
            if task.done(state):
                outcome = "success"
                break
        calls_n = sum(len(at["calls"]) for r in log for at in r["attempts"])
        replan_attempts = sum(at["replan"] > 0 for r in log for at in r["attempts"])
        return {"task": "sort", "adapter": adapter.name, "model": adapter.model,
                "scene_seed": scene_seed, "seed": seed, "start": start,
                "outcome": outcome, "note": note,
                "metrics": {"success": outcome == "success", "rounds": len(log),
                            "env_steps": env_steps, "replans": replan_attempts,
                            "llm_calls": calls_n, "tokens": adapter.tokens},
                "final": {o: describe_cube(task, state, o) for o in task.objects},
                "log": log}
    finally:
        if own:
            ch.close()


def _plan_round(ch: RocoChecker, adapter: DialogAgents, state: Any, mem: _Memory,
                chat: list[str], attempts: list[dict[str, Any]], replans: int,
                max_calls: int, world: str | None) -> RocoResult | None:
    """One round's dialog: up to ``replans`` plans, each checked, the next prompted with
    the last one's feedback; the last check (None if none ran). ``chat`` and ``attempts``
    grow as it goes (so a budget hit keeps what was said)."""
    task = ch.task
    feedback: list[str] = []
    failures: list[tuple[str, tuple[str, ...], dict[str, str]]] = []
    result: RocoResult | None = None
    for i in range(replans):
        agent, final, calls = _dialog_round(adapter, task, state, mem, chat,
                                            feedback, i, failures, max_calls,
                                            world)
        chat += [f"[{c['agent']}]:\n{c['response'].strip()}" for c in calls]
        result = ch.check(state, final, agent)
        if result.ok:
            fb = "None"
        elif not result.roco_ok:
            fb = result.feedback
        else:  # RoCo's checks passed, cellspec's did not: say so in the feedback
            fb = ("[Environment Feedback]:\n- Previous Plan:\n"
                  f"{result.parsed.proposal}\n" + "".join(
                      f"- cellspec check {f.check} failed: {f.text}\n"
                      for f in result.failures))
        feedback.append(fb)
        acts = {a: t.action for a, t in (result.parsed.steps[0].items()
                                          if result.parsed.steps else [])}
        for f in result.failures:
            failures.append((f.check, f.robots, acts))
        attempts.append({"replan": i, "calls": calls, "final_agent": agent,
                         "plan": result.parsed.proposal or None,
                         "verdict": "pass" if result.ok else "fail",
                         "roco_verdict": "pass" if result.roco_ok else "fail",
                         "failures": [f.to_json() for f in result.failures],
                         "feedback": fb})
        if result.ok:
            break
    return result

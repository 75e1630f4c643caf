"""Packaging: the core verbs run without the optional extras, and a verb that needs a missing
extra names it (exit 2, no traceback). A missing package is simulated with a ``None`` entry in
``sys.modules`` (what ``import`` treats as "not installed")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib

import pytest
from conftest import REPO, STATION

from cellspec.cli import main
from cellspec.core.extras import EXTRA_OF, EXTRAS, MissingExtra, require, require_extra

TOWER = REPO / "rules" / "examples" / "tower3.json"
BROKEN = REPO / "rules" / "examples" / "tower3_broken.json"
OPTIONAL = ("pybullet", "pybullet_data", "pybullet_utils", "viser", "trimesh", "openai")


def _missing(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_sim_without_the_twin_extra_names_it(monkeypatch, capsys):
    _missing(monkeypatch, "pybullet")
    code, out, err = _run(capsys, "sim", STATION, TOWER)
    assert code == 2
    assert out == ""
    assert err.strip() == ("cellspec: error: cellspec sim needs the twin extra (pybullet is not "
                           "installed): pip install 'cellspec[twin]'")


@pytest.mark.parametrize("verb, args", [
    ("settle", (STATION, TOWER)),
    ("check-plan", (REPO / "rules" / "cells" / "sort_cubes.cell",
                    REPO / "rules" / "plans" / "sort_cubes_ok.txt")),
    ("run", (STATION, TOWER, "--world", "w.db")),
])
def test_other_twin_verbs_name_the_twin_extra(monkeypatch, capsys, tmp_path, verb, args):
    monkeypatch.chdir(tmp_path)
    _missing(monkeypatch, "pybullet")
    code, _, err = _run(capsys, verb, *args)
    assert code == 2
    assert f"cellspec {verb} needs the twin extra" in err
    assert "pip install 'cellspec[twin]'" in err and "Traceback" not in err
    assert not (tmp_path / "w.db").exists()  # nothing was started


def test_review_without_the_review_extra_names_it(monkeypatch, capsys):
    _missing(monkeypatch, "viser")
    code, _, err = _run(capsys, "review", STATION, TOWER, "--port", "0")
    assert code == 2
    assert "cellspec review needs the review extra (viser is not installed): " \
           "pip install 'cellspec[review]'" in err


def test_review_without_trimesh_names_the_review_extra(monkeypatch, capsys):
    _missing(monkeypatch, "trimesh")
    code, _, err = _run(capsys, "review", STATION, TOWER, "--port", "0")
    assert code == 2
    assert "needs the review extra (trimesh is not installed)" in err


def test_review_robots_need_the_twin(monkeypatch, capsys):
    _missing(monkeypatch, "pybullet")
    code, _, err = _run(capsys, "review", STATION, TOWER, "--port", "0")
    assert code == 2
    assert "cellspec review (its robots; --no-robots draws base markers only) needs the twin " \
           "extra" in err
    with pytest.raises(MissingExtra, match="cellspec review needs the twin extra"):
        require_extra("twin", verb="review")


def test_design_with_the_openai_adapter_without_the_llm_extra(monkeypatch, capsys):
    _missing(monkeypatch, "openai")
    code, out, err = _run(capsys, "design", "build a 3-cube tower at x 0.4 y 0.2", "--cell",
                          STATION, "--adapter", "openai", "--base-url", "http://127.0.0.1:9")
    assert code == 2 and out == ""
    assert err.strip() == ("cellspec: error: cellspec design --adapter openai needs the llm "
                           "extra (openai is not installed): pip install 'cellspec[llm]'")


def test_the_openai_adapter_itself_names_the_llm_extra(monkeypatch):
    from cellspec.agent.dialog_agents import OpenAIAgents
    from cellspec.agent.openai_adapter import OpenAIAdapter

    _missing(monkeypatch, "openai")
    for cls in (OpenAIAdapter, OpenAIAgents):
        with pytest.raises(MissingExtra) as e:
            cls("m", base_url="http://127.0.0.1:9")
        assert e.value.extra == "llm" and e.value.module == "openai"
        assert "pip install 'cellspec[llm]'" in str(e.value)


def test_design_offline_needs_no_llm_extra(monkeypatch, capsys):
    _missing(monkeypatch, "openai")
    code, out, err = _run(capsys, "design", "build a 3-cube tower at x 0.4 y 0.2", "--cell",
                          STATION, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["outcome"] == "generated"


def test_design_execute_without_the_twin(monkeypatch, capsys):
    _missing(monkeypatch, "pybullet")
    code, _, err = _run(capsys, "design", "build a 3-cube tower at x 0.4 y 0.2", "--cell",
                        STATION, "--execute")
    assert code == 2
    assert "cellspec design --execute needs the twin extra" in err


def test_require_returns_the_module_and_refuses_unknown_ones():
    assert require("openai").__name__ == "openai"
    assert EXTRA_OF["pybullet"] == "twin" and EXTRA_OF["trimesh"] == "review"
    with pytest.raises(ValueError, match="belongs to no extra"):
        require("json")  # a core module is imported directly, never through require


def test_a_broken_install_is_not_a_missing_extra(tmp_path, monkeypatch):
    """An installed package whose own dependency is missing raises as it is (exit 3 at the
    CLI, a bug in the environment), not "install the extra"."""
    pkg = tmp_path / "brokenpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as e:
        require("brokenpkg", extra="twin")
    assert e.value.name == "no_such_dependency_xyz"
    with pytest.raises(MissingExtra):
        require("no_such_package_xyz", extra="twin")


def test_pyproject_extras_match_the_code():
    """Every module core.extras names is installed by its extra; core dependencies hold none of
    them; every dependency has an upper bound; [test] installs [all]."""
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    opt = meta["optional-dependencies"]
    dist = {"pybullet": "pybullet", "pybullet_data": "pybullet", "viser": "viser",
            "trimesh": "trimesh", "openai": "openai"}
    for extra, mods in EXTRAS.items():
        names = {r.split(">")[0].split("<")[0].split("[")[0] for r in opt[extra]}
        assert {dist[m] for m in mods} <= names, extra
    core = {r.split(">")[0].split("[")[0] for r in meta["dependencies"]}
    assert not core & set(dist.values())
    for req in meta["dependencies"] + [r for rs in opt.values() for r in rs]:
        assert req.startswith("cellspec[") or "<" in req, req
    assert "cellspec[all]" in opt["test"]
    assert set(EXTRAS) <= set(opt["all"][0].split("[")[1].rstrip("]").split(","))


@pytest.mark.slow
def test_core_verbs_run_without_any_extra(tmp_path):
    """check, plan, repair and the README's main job (design) in a process where pybullet,
    viser, trimesh and openai cannot be imported; `test` of a plan test names the twin."""
    script = textwrap.dedent(f"""
        import sys
        for m in {OPTIONAL!r}:
            sys.modules[m] = None
        from cellspec.cli import main
        codes = [main(["check", {str(STATION)!r}, {str(BROKEN)!r}, "-q"]),
                 main(["plan", {str(STATION)!r}, {str(TOWER)!r}, "-q"]),
                 main(["repair", {str(STATION)!r}, {str(BROKEN)!r}, "-q"]),
                 main(["design", "build a 3-cube tower at x 0.4 y 0.2", "--cell",
                       {str(STATION)!r}]),
                 main(["test", {str(REPO / "rules" / "cells" / "sort_cubes.cell")!r}, "-k",
                       "round_one"])]
        print("CODES", codes)
    """)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=300, check=False)
    assert "Traceback" not in res.stderr, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "CODES [1, 0, 0, 0, 2]", res.stdout + res.stderr
    assert "needs the twin extra (pybullet is not installed)" in res.stderr


def test_every_verb_declares_the_shared_arguments_once_in_one_order():
    """commands.common.add_shared is the one declaration: every verb has -q, and the shared
    options it takes come first, in one order, before the verb's own."""
    from cellspec.cli import build_parser

    shared = ["-h", "-o", "--format", "--time-limit", "--max-memory", "-q"]
    p = build_parser()
    for name, sp in p.verbs.items():
        opts = [a.option_strings[0] for a in sp._actions if a.option_strings]
        assert "-q" in opts, name
        head = opts[:opts.index("-q") + 1]
        assert all(o in shared for o in head), (name, head)
        assert head == sorted(head, key=shared.index), (name, head)
        assert not set(opts[len(head):]) & set(shared), (name, opts)
        if "--format" in opts:
            fmt = next(a for a in sp._actions if "--format" in a.option_strings)
            assert set(fmt.choices) == {"pretty", "json"}, name

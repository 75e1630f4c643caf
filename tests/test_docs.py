"""The documentation cannot go stale: docs/cli.md is the parser's, the README's commands are
the ones CI runs, and every relative link in the README and docs/ names a file that exists."""

from __future__ import annotations

import importlib.util
import re

from conftest import REPO


def _gen_cli():
    spec = importlib.util.spec_from_file_location("gen_cli", REPO / "docs" / "gen_cli.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cli_reference_is_generated_from_the_parser():
    """docs/cli.md equals what `python docs/gen_cli.py` writes (re-run it after changing
    a verb's arguments)."""
    want = _gen_cli().render()
    assert (REPO / "docs" / "cli.md").read_text(encoding="utf-8") == want, \
        "docs/cli.md is stale: run python docs/gen_cli.py"


def test_cli_reference_names_every_verb_and_option():
    from cellspec.cli import build_parser

    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    root = build_parser()
    sub = next(a for a in root._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, p in sub.choices.items():
        assert f"## `cellspec {name}`" in page
        for a in p._actions:
            for opt in a.option_strings:
                if opt not in ("-h", "--help"):
                    assert f"`{opt}" in page, (name, opt)


def _links(path):
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)


def test_relative_links_resolve():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
             REPO / "bench" / "RESULTS.md"]
    broken = []
    for page in pages:
        if not page.exists():
            continue
        for target in _links(page):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert not broken, broken


def test_language_reference_lists_every_robot_model():
    from cellspec.robots.models import MODELS

    text = (REPO / "docs" / "language.md").read_text(encoding="utf-8")
    para = text[text.index("Robot models:"):].split("\n\n", 1)[0]
    assert all(f"`{m}`" in para for m in MODELS), (MODELS, para)


def test_user_docs_carry_no_issue_or_round_numbers():
    """The README and docs/ describe the program as it is; the history is in git and the
    dated figures in bench/RESULTS.md."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    hits = [f"{p.relative_to(REPO)}:{n}: {line.strip()}" for p in pages
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if re.search(r"\b(issue|round) \d+\b", line, re.I)]
    assert not hits, hits


def test_readme_is_a_front_page_with_the_commands_ci_runs():
    """At most 250 lines; its two commands are the install-and-design line and the test
    command that .ci/run runs (in a fresh venv)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    block = readme.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert block == ["pip install -e '.[test]' && cellspec design \"build a 3-cube tower at x "
                     "0.4 y 0.2\" --cell rules/cells/dual_arm_station.cell",
                     "python -m pytest -q -n 2"]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install --quiet --disable-pip-version-check -e '.[test]'" in ci
    assert 'run_tests "default run" -q -n 2' in ci  # python -m pytest "$@"

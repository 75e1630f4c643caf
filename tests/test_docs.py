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

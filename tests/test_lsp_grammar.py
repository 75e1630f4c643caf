"""The shipped editor files: the TextMate grammar and the VS Code client that uses it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cellspec.core.ir import RELATIONS

EDITORS = Path(__file__).resolve().parent.parent / "editors"


def _patterns(node, out):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("match", "begin", "end"):
                out.append(v)
            else:
                _patterns(v, out)
    elif isinstance(node, list):
        for v in node:
            _patterns(v, out)
    return out


def test_textmate_grammar_is_valid_and_scopes_the_language():
    g = json.loads((EDITORS / "cellspec.tmLanguage.json").read_text())
    assert g["scopeName"] == "source.cellspec" and g["fileTypes"] == ["cell"]
    regexes = {p: re.compile(p) for p in _patterns(g["repository"], [])}
    assert len(regexes) >= 15
    rel = re.compile(g["repository"]["relations"]["match"])
    assert sorted(m.group(1) for m in rel.finditer(
        " ".join(f"{r}(p, q)" for r in RELATIONS))) == sorted(RELATIONS)
    assert rel.search("contact p") is None  # a relation only when called
    decl = re.compile(g["repository"]["declarations"]["patterns"][0]["match"])
    assert decl.match("rule gravity").group(2) == "gravity"
    kw = [(re.compile(p["match"]), p["name"]) for p in g["repository"]["keywords"]["patterns"]]

    def scope(word: str) -> list[str]:
        return [name for r, name in kw if r.fullmatch(word)]

    # preferences: `severity preference weight 3` in a rule, `expect preferences >= 9` in a test
    assert scope("preference") == ["constant.language.cellspec"]
    assert scope("weight") == ["keyword.other.cell.cellspec"]
    assert scope("preferences") == ["keyword.other.test.cellspec"]
    line = re.compile(g["repository"]["comments"]["patterns"][0]["match"], re.M)
    assert line.search("x // a comment").group(0) == "// a comment"


def test_vscode_client_uses_the_grammar_and_the_lsp_verb():
    pkg = json.loads((EDITORS / "vscode" / "package.json").read_text())
    (grammar,) = pkg["contributes"]["grammars"]
    assert (EDITORS / "vscode" / grammar["path"]).resolve() == \
        (EDITORS / "cellspec.tmLanguage.json").resolve()
    assert pkg["contributes"]["languages"][0]["extensions"] == [".cell"]
    conf = pkg["contributes"]["configuration"]["properties"]["cellspec.server.command"]
    assert conf["default"] == ["cellspec", "lsp"]
    assert "vscode-languageclient" in pkg["dependencies"]
    assert "LanguageClient" in (EDITORS / "vscode" / "extension.js").read_text()

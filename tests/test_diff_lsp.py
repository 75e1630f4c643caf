"""The language server's "stricter than HEAD" hints: a real LSP client (pytest-lsp) opens and
saves a changed rule file of a temporary git checkout and reads the Information
diagnostics the server publishes at the changed rules."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types as T

pytest_lsp = pytest.importorskip("pytest_lsp")
from lsp_wait import until as wait_until  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

from cellspec.lsp.gitdiff import hints  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
ENV.pop("CELLSPEC_DEBUG", None)
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
in_loop = pytest.mark.asyncio(loop_scope="module")

CELL = """cell box {
    units m
    workspace x [0, 0.4] y [0, 0.4] z [0, 0.3]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
}

rule left "{p} is too far right" :
    forall p: p.x <= 0.3

rule low "{p} is too high" :
    forall p: p.top <= 0.2

rule same "{p} is too far back" :
    forall p: p.y <= 0.3
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("lspgit")
    (d / "a.cell").write_text(CELL)
    git = ["git", "-C", str(d), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "rules"], check=True)
    return d


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(
    server_command=[sys.executable, "-m", "cellspec", "lsp", "--stdio"], server_env=ENV))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(T.InitializeParams(
        capabilities=client_capabilities("visual-studio-code")))
    yield
    await lsp_client.shutdown_session()


async def until(client: LanguageClient, cond, timeout: float = 90.0):
    """:func:`lsp_wait.until` with this file's longer wait (a diff runs per save)."""
    await wait_until(client, cond, timeout)


def diff_hints(client: LanguageClient, uri: str) -> dict[int, str]:
    return {d.range.start.line: d.message for d in client.diagnostics.get(uri, [])
            if d.source == "cellspec diff"}


@in_loop
async def test_changed_rules_say_how_they_relate_to_head(client: LanguageClient, repo: Path):
    f = repo / "a.cell"
    text = (CELL.replace("p.x <= 0.3", "p.x <= 0.25").replace("p.top <= 0.2", "p.top <= 0.25")
            .replace("p.y <= 0.3", "not p.y > 0.3"))
    f.write_text(text)
    uri = f.resolve().as_uri()
    client.text_document_did_open(T.DidOpenTextDocumentParams(text_document=T.TextDocumentItem(
        uri=uri, language_id="cellspec", version=1, text=text)))
    await until(client, lambda: len(diff_hints(client, uri)) == 4)
    got = diff_hints(client, uri)
    assert got[0] == ("the error rules as a whole: incomparable with HEAD (layouts of up to 3 "
                      "parts)")  # at the cell's name, line 0
    lines = text.splitlines()
    at = {name: next(k for k, ln in enumerate(lines) if ln.startswith(f"rule {name} "))
          for name in ("left", "low", "same")}
    assert got[at["left"]].startswith("stricter than HEAD: cube1 at (")
    assert "passes HEAD, fails now left(cube1)" in got[at["left"]]
    assert got[at["low"]].startswith("looser than HEAD: cube1 at (")
    assert got[at["same"]] == "same meaning as HEAD (layouts of up to 3 parts)"
    # every diagnostic of the diff is Information, at the rule's name
    for d in client.diagnostics[uri]:
        if d.source == "cellspec diff":
            assert d.severity == T.DiagnosticSeverity.Information
            assert lines[d.range.start.line][d.range.start.character:].split()[0] in {
                *at, "box"}
    # saved back to HEAD's text: the hints go away
    f.write_text(CELL)
    client.text_document_did_change(T.DidChangeTextDocumentParams(
        text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[T.TextDocumentContentChangeWholeDocument(text=CELL)]))
    client.text_document_did_save(T.DidSaveTextDocumentParams(
        text_document=T.TextDocumentIdentifier(uri=uri)))
    await until(client, lambda: not diff_hints(client, uri))


@in_loop
async def test_no_hints_outside_a_checkout(client: LanguageClient,
                                           tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("nogit")
    f = d / "a.cell"
    f.write_text(CELL)
    uri = f.resolve().as_uri()
    client.text_document_did_open(T.DidOpenTextDocumentParams(text_document=T.TextDocumentItem(
        uri=uri, language_id="cellspec", version=1, text=CELL)))
    await until(client, lambda: uri in client.diagnostics)
    await asyncio.sleep(1.0)
    assert diff_hints(client, uri) == {}


def test_hints_of_a_diff_answer():
    rule = {"rule": "r", "in_old": True, "in_new": False, "relation": "looser",
            "witnesses": {"old_only": None, "new_only": None}}
    [h] = hints({"parts": 2, "rules": [rule]})
    assert (h.rule, h.message) == (None, "rule r removed since HEAD: looser (layouts of up "
                                   "to 2 parts)")
    same = {**rule, "in_new": True, "relation": "equivalent", "changed": False}
    assert hints({"parts": 2, "rules": [same]}) == []
    down = {**same, "changed": True, "severity": {"old": "error", "new": "warning"}}
    [h] = hints({"parts": 2, "rules": [down]})
    assert h.message == ("same meaning as HEAD; severity error -> warning since HEAD "
                         "(layouts of up to 2 parts)")

"""`cellspec lsp` end to end: a real LSP client (pytest-lsp) drives the server over stdio."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from lsprotocol import types as T

pytest_lsp = pytest.importorskip("pytest_lsp")
from lsp_wait import until  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
ENV.pop("CELLSPEC_DEBUG", None)
pytestmark = pytest.mark.asyncio(loop_scope="module")

CELL = """import physical

cell demo {
    units m
    workspace x [0.20, 0.70] y [0.05, 0.50] z [0.00, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    robot arm model abb_irb120 base (0, 0.275, 0) reach 0.58 gripper vacuum
    default gripper parallel opening 0.07 depth 0.02
    keepout post box x [0.60, 0.65] y [0.05, 0.10] z [0.00, 0.30]
    tolerance contact 0.001
}

rule low "{p} is too high: {p.top}" severity warning :
    forall p in cube: p.top <= 0.25 and not intersects(p, post)

test tower_ok {
    layout {
        c1 cube at (0.40, 0.20, 0.025)
        c2 cube at (0.40, 0.20, 0.075)
    }
    order (c1, c2)
    expect pass
    only
}

test floating {
    layout {
        c1 cube at (0.40, 0.20, 0.125)
    }
    expect fail gravity(c1)
}

test wrong_expectation {
    layout {
        c1 cube at (0.40, 0.20, 0.025)
    }
    expect fail gravity(c1)
}

test from_file {
    layout "tower.json"
    expect pass
}
"""
TOWER = ('{"units": "m", "parts": [{"id": "c1", "type": "cube", '
         '"pos": [0.40, 0.20, 0.025]}]}\n')


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("lsp")
    (d / "demo.cell").write_text(CELL)
    (d / "tower.json").write_text(TOWER)
    (d / "a.cell").write_text('import "b.cell"\n')
    (d / "b.cell").write_text('import "a.cell"\n')
    return d


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(
    server_command=[sys.executable, "-m", "cellspec", "lsp", "--stdio"], server_env=ENV))
async def client(lsp_client: LanguageClient):
    lsp_client.lens_refreshes = 0  # type: ignore[attr-defined]

    @lsp_client.feature(T.WORKSPACE_CODE_LENS_REFRESH)
    def _refresh(params: None) -> None:
        lsp_client.lens_refreshes += 1  # type: ignore[attr-defined]

    await lsp_client.initialize_session(T.InitializeParams(
        capabilities=client_capabilities("visual-studio-code")))
    yield
    await lsp_client.shutdown_session()


def uri(path: Path) -> str:
    return path.resolve().as_uri()


async def open_doc(client: LanguageClient, path: Path, text: str | None = None,
                   version: int = 1) -> str:
    u = uri(path)
    client.diagnostics.pop(u, None)
    client.text_document_did_open(T.DidOpenTextDocumentParams(text_document=T.TextDocumentItem(
        uri=u, language_id="cellspec", version=version,
        text=path.read_text() if text is None else text)))
    await until(client, lambda: u in client.diagnostics)
    return u


async def change(client: LanguageClient, u: str, text: str, version: int) -> None:
    client.text_document_did_change(T.DidChangeTextDocumentParams(
        text_document=T.VersionedTextDocumentIdentifier(uri=u, version=version),
        content_changes=[T.TextDocumentContentChangeWholeDocument(text=text)]))


def at(text: str, needle: str, offset: int = 0) -> T.Position:
    """The position of the first occurrence of needle (plus offset characters)."""
    k = text.index(needle) + offset
    line = text.count("\n", 0, k)
    return T.Position(line=line, character=k - (text.rfind("\n", 0, k) + 1))


async def test_clean_file_has_no_diagnostics(client: LanguageClient, files: Path):
    u = await open_doc(client, files / "demo.cell")
    assert list(client.diagnostics[u]) == []


async def test_semantic_error_is_the_cli_message_with_its_range(client, files: Path):
    from cellspec.core.errors import CellspecError
    from cellspec.dsl.parser import load_cell

    bad = CELL.replace("expect fail gravity(c1)\n}\n\ntest wrong",
                       "expect fail gravty(c1)\n}\n\ntest wrong")
    path = files / "bad_rule.cell"
    path.write_text(bad)
    u = await open_doc(client, path)
    with pytest.raises(CellspecError) as cli_err:
        load_cell(path)
    (cli,) = cli_err.value.diagnostics
    (d,) = client.diagnostics[u]
    assert d.message == cli.message
    assert d.message.startswith("expected violation of unknown rule 'gravty'; did you mean "
                                "'gravity'? (rules: gravity, ")
    assert d.severity == T.DiagnosticSeverity.Error
    assert (d.range.start.line, d.range.start.character) == (cli.line - 1, cli.col - 1)
    assert d.range.start == at(bad, "gravty(c1)")
    assert d.range.end.character == d.range.start.character + len("gravty")


async def test_import_already_imported_through_another_is_a_warning(client, files: Path):
    (files / "lib.cell").write_text('import physical\nrule r "m" : forall p: p.top <= 1\n')
    path = files / "imports.cell"
    path.write_text('import physical\nimport "lib.cell"\n'
                    'cell c { workspace x [0, 1] y [0, 1] z [0, 1] }\n')
    u = await open_doc(client, path)
    (d,) = client.diagnostics[u]
    assert d.severity == T.DiagnosticSeverity.Warning
    assert d.message == ("unused import: 'physical' is already imported through 'lib.cell' "
                         "(line 2)")
    assert (d.range.start.line, d.range.start.character, d.range.end.character) == (0, 7, 15)


async def test_change_updates_diagnostics_syntax_then_fixed(client, files: Path):
    path = files / "edit.cell"
    path.write_text(CELL)
    u = await open_doc(client, path)
    assert list(client.diagnostics[u]) == []
    broken = CELL.replace("part cube size (0.05, 0.05, 0.05) mass 0.1",
                          "part cube size (0.05, 0.05) mass 0.1")
    client.diagnostics.pop(u)
    await change(client, u, broken, 2)
    await until(client, lambda: client.diagnostics.get(u))
    (d,) = client.diagnostics[u]
    assert d.message.startswith("syntax error: expected ','")
    assert d.range.start.line == at(broken, "part cube").line
    client.diagnostics.pop(u)
    await change(client, u, CELL, 3)
    await until(client, lambda: u in client.diagnostics)
    assert list(client.diagnostics[u]) == []


async def test_hover_relation_attribute_rule_part_robot_keyword(client, files: Path):
    from cellspec.core.ir import RELATION_DOCS

    u = await open_doc(client, files / "demo.cell")

    async def hov(needle: str, offset: int = 0) -> str:
        h = await client.text_document_hover_async(T.HoverParams(
            text_document=T.TextDocumentIdentifier(uri=u), position=at(CELL, needle, offset)))
        assert h is not None, needle
        return h.contents.value

    assert RELATION_DOCS["intersects"] in await hov("intersects(p")
    assert "intersects(part, zone)" in await hov("intersects(p")
    assert "top face z" in await hov("p.top <=", 2)
    text = await hov("gravity(c1)")  # a standard rule, from the imported library
    assert text.startswith("**rule** `gravity` — cellspec/rules/physical.cell:")
    assert "grounded(p) or exists q: supports(q, p)" in text
    assert "part cube size (0.05, 0.05, 0.05) mass 0.1" in await hov("cube:")
    assert "model abb_irb120" in await hov("arm model")
    assert "keep-out zone" in await hov("post)")
    assert "test part" in await hov("c2 cube") and "tower_ok" in await hov("c2 cube")
    assert "regression test" in await hov("test tower_ok")
    nothing = await client.text_document_hover_async(T.HoverParams(
        text_document=T.TextDocumentIdentifier(uri=u), position=T.Position(line=1, character=0)))
    assert nothing is None


async def test_definition_rule_import_part_keepout_layout(client, files: Path):
    from cellspec.dsl.parser import stdlib_path

    u = await open_doc(client, files / "demo.cell")
    physical = stdlib_path("physical").read_text()

    async def goto(needle: str, offset: int = 0) -> list[T.Location]:
        r = await client.text_document_definition_async(T.DefinitionParams(
            text_document=T.TextDocumentIdentifier(uri=u), position=at(CELL, needle, offset)))
        return list(r or [])

    (loc,) = await goto("gravity(c1)")
    assert loc.uri == uri(stdlib_path("physical"))
    assert loc.range.start == at(physical, "gravity \"")
    (loc,) = await goto("physical")
    assert loc.uri == uri(stdlib_path("physical"))
    (loc,) = await goto("cube:")
    assert loc.uri == u and loc.range.start == at(CELL, "cube size")
    (loc,) = await goto("post)")
    assert loc.range.start == at(CELL, "post box")
    (loc,) = await goto("tower.json", 2)
    assert loc.uri == uri(files / "tower.json")
    (loc,) = await goto("c2)")  # in `order (c1, c2)`: the test's own part
    assert loc.range.start == at(CELL, "c2 cube")
    (loc,) = await goto("low \"", 0)
    assert loc.range.start == at(CELL, "low \"")
    assert await goto("forall") == []


async def test_document_symbols(client, files: Path):
    u = await open_doc(client, files / "demo.cell")
    syms = await client.text_document_document_symbol_async(T.DocumentSymbolParams(
        text_document=T.TextDocumentIdentifier(uri=u)))
    top = [(s.name, s.detail) for s in syms]
    assert top == [("physical", "import"), ("demo", "cell"), ("low", "rule"),
                   ("tower_ok", "test"), ("floating", "test"),
                   ("wrong_expectation", "test"), ("from_file", "test")]
    cell = syms[1]
    assert [(c.name, c.detail) for c in cell.children] == [
        ("cube", "part type"), ("arm", "robot"), ("post", "keep-out zone"),
        ("table", "surface")]
    assert [c.name for c in syms[3].children] == ["c1", "c2"]


async def test_completion(client, files: Path):
    text = CELL.replace("p.top <= 0.25", "p.to")
    path = files / "complete.cell"
    path.write_text(text)
    u = await open_doc(client, path)

    async def labels(pos: T.Position) -> list[str]:
        r = await client.text_document_completion_async(T.CompletionParams(
            text_document=T.TextDocumentIdentifier(uri=u), position=pos))
        return [i.label for i in r.items]

    attrs = await labels(at(text, "p.to", 4))
    assert "top" in attrs and "bottom" in attrs and "forall" not in attrs
    after_fail = await labels(at(text, "gravity(c1)\n}\n\ntest wrong"))
    assert sorted(after_fail[:9]) == ["gravity", "grip_access", "keepout", "low",
                                      "no_overlap", "stability", "stability_stages",
                                      "support_order", "workspace"]
    assert after_fail.index("gravity") < after_fail.index("forall")
    anywhere = await labels(T.Position(line=at(text, "rule low").line, character=0))
    for word in ("forall", "contact", "supports", "cube", "post", "arm", "low", "gravity"):
        assert word in anywhere
    in_dom = await labels(at(text, "cube:"))
    assert in_dom[:2] == ["cube", "keepout"]


async def test_formatting_uses_cellspec_fmt(client, files: Path):
    from cellspec.dsl.formatter import format_source

    messy = CELL.replace("    units m", "units   m").replace("expect pass\n    only",
                                                              "expect   pass only")
    path = files / "messy.cell"
    path.write_text(messy)
    u = await open_doc(client, path)
    edits = await client.text_document_formatting_async(T.DocumentFormattingParams(
        text_document=T.TextDocumentIdentifier(uri=u),
        options=T.FormattingOptions(tab_size=4, insert_spaces=True)))
    (edit,) = edits
    assert edit.new_text == format_source(messy) != messy
    assert edit.range.start == T.Position(line=0, character=0)
    broken = await open_doc(client, files / "broken.cell", "cell x {", 1)
    assert await client.text_document_formatting_async(T.DocumentFormattingParams(
        text_document=T.TextDocumentIdentifier(uri=broken),
        options=T.FormattingOptions(tab_size=4, insert_spaces=True))) is None


async def test_code_lens_runs_tests_and_shows_outcome(client, files: Path):
    u = await open_doc(client, files / "demo.cell")
    lenses = await client.text_document_code_lens_async(T.CodeLensParams(
        text_document=T.TextDocumentIdentifier(uri=u)))
    assert [(lens.command.title, lens.command.arguments[1]) for lens in lenses] == [
        ("▶ run test", n) for n in ("tower_ok", "floating", "wrong_expectation", "from_file")]
    assert lenses[0].range.start == at(CELL, "test tower_ok")
    ok = await client.workspace_execute_command_async(T.ExecuteCommandParams(
        command=lenses[0].command.command, arguments=lenses[0].command.arguments))
    assert [(t["name"], t["status"]) for t in ok["tests"]] == [("tower_ok", "passed")]
    bad = await client.workspace_execute_command_async(T.ExecuteCommandParams(
        command="cellspec.runTest", arguments=[u, "wrong_expectation"]))
    (t,) = bad["tests"]
    assert t["status"] == "failed" and t["missing"] == ["gravity(c1)"]
    await until(client, lambda: any(d.source == "cellspec test" and "wrong_expectation"
                                    in d.message for d in client.diagnostics.get(u, [])))
    shown = {d.message for d in client.diagnostics[u] if d.source == "cellspec test"}
    assert shown == {"test tower_ok passed",
                     "test wrong_expectation failed: 1 expected violation(s) missing"}
    assert client.lens_refreshes >= 2
    lenses = await client.text_document_code_lens_async(T.CodeLensParams(
        text_document=T.TextDocumentIdentifier(uri=u)))
    titles = [lens.command.title for lens in lenses]
    assert titles == ["✓ passed · run again", "▶ run test",
                      "✗ failed: 1 expected violation(s) missing · run again", "▶ run test"]
    every = await client.workspace_execute_command_async(T.ExecuteCommandParams(
        command="cellspec.runFileTests", arguments=[u]))
    assert [(t["name"], t["status"]) for t in every["tests"]] == [
        ("tower_ok", "passed"), ("floating", "passed"), ("wrong_expectation", "failed"),
        ("from_file", "passed")]
    none = await client.workspace_execute_command_async(T.ExecuteCommandParams(
        command="cellspec.runTest", arguments=[u, "no_such_test"]))
    assert none["error"].startswith("no test named 'no_such_test'")
    junk = await client.workspace_execute_command_async(T.ExecuteCommandParams(
        command="cellspec.runTest", arguments=[42]))
    assert junk["error"].startswith("usage:")


async def test_survives_hostile_input(client, files: Path):
    # half-typed
    u = await open_doc(client, files / "half.cell", "cell x { part cube size (0.05,", 1)
    (d,) = client.diagnostics[u]
    assert d.message.startswith("syntax error: expected a number")
    h = await client.text_document_hover_async(T.HoverParams(
        text_document=T.TextDocumentIdentifier(uri=u), position=T.Position(line=0, character=11)))
    assert h is not None and "part type" in h.contents.value
    # binary
    u = await open_doc(client, files / "bin.cell", "\x00\x01\xff\xfe garbage \x00", 1)
    assert client.diagnostics[u][0].message.startswith("binary content")
    # 5 MB
    big = ("// filler\n" * 520_000) + "rule r \"m\" : forall p: p.top <= 1\n"
    u = await open_doc(client, files / "big.cell", big, 1)
    (d,) = client.diagnostics[u]
    # the CLI refuses a .cell file over 64 KiB: live diagnostics say so as an error (issue 31)
    assert d.severity == T.DiagnosticSeverity.Error and "live diagnostics stop at" in d.message
    syms = await client.text_document_document_symbol_async(T.DocumentSymbolParams(
        text_document=T.TextDocumentIdentifier(uri=u)))
    assert [s.name for s in syms] == ["r"]
    # missing and cyclic imports
    missing = files / "missing.cell"
    missing.write_text('import "nowhere.cell"\ncell c { workspace x [0, 1] y [0, 1] z [0, 1] }\n')
    u = await open_doc(client, missing)
    (d,) = client.diagnostics[u]
    assert d.message.startswith("imported file not found:") and d.range.start.line == 0
    u = await open_doc(client, files / "a.cell")
    (d,) = client.diagnostics[u]
    assert "import cycle" in d.message
    locs = await client.text_document_definition_async(T.DefinitionParams(
        text_document=T.TextDocumentIdentifier(uri=u), position=T.Position(line=0, character=9)))
    assert [loc.uri for loc in locs] == [uri(files / "b.cell")]
    # an unsaved buffer with imports says so instead of guessing
    u = await open_doc(client, files / "unsaved.cell", 'import physical\ncell c { }\n', 1)
    (d,) = client.diagnostics[u]
    assert d.message == "save the file to check it with its imports"
    assert d.severity == T.DiagnosticSeverity.Information
    # rapid edits: only the last version's diagnostics count
    path = files / "rapid.cell"
    path.write_text(CELL)
    u = await open_doc(client, path)
    client.diagnostics.pop(u)
    for v in range(2, 42):
        await change(client, u, CELL[: len(CELL) * v // 41], v)
    await change(client, u, CELL.replace("gravity(c1)\n}\n\ntest wrong",
                                         "gravityy(c1)\n}\n\ntest wrong"), 42)
    await until(client, lambda: any("gravityy" in d.message
                                    for d in client.diagnostics.get(u, [])))
    msgs = [d.message for d in client.diagnostics[u]]
    assert len(msgs) == 1 and msgs[0].startswith(
        "expected violation of unknown rule 'gravityy'; did you mean 'gravity'?")
    # unknown method: an error reply, and the server lives on
    with pytest.raises(Exception, match="(?i)method"):
        await client.protocol.send_request_async("cellspec/noSuchMethod", {})
    client.protocol.notify("cellspec/noSuchNotification", {})
    h = await client.text_document_hover_async(T.HoverParams(
        text_document=T.TextDocumentIdentifier(uri=uri(files / "demo.cell")),
        position=at(CELL, "intersects(p")))
    assert h is not None
    # a position past the end of a document
    h = await client.text_document_hover_async(T.HoverParams(
        text_document=T.TextDocumentIdentifier(uri=uri(files / "demo.cell")),
        position=T.Position(line=10_000, character=5)))
    assert h is None


V2 = """const GAP = 0.002
predicate resting(p) : grounded(p) or exists q: supports(q, p)

cell v2 {
    workspace x [0, 1] y [0, 1] z [0, 1]
    surface table z 0
    part cube size (0.05, 0.05, 0.05)
    robot arm model panda base (0, 0, 0) reach 0.8 gripper vacuum
}

rule rest "{p} floats" : forall p: resting(p) and not near(p, p, GAP)
rule reach "{p}" : forall p: exists r in robot: reachable(p, r)
"""


async def test_version2_hover_completion_and_diagnostics(client, files: Path):
    from cellspec.core.ir import DOMAIN_DOCS, RELATION_DOCS

    path = files / "v2.cell"
    path.write_text(V2)
    u = await open_doc(client, path)
    assert not client.diagnostics[u]

    async def hov(needle: str, offset: int = 0) -> str:
        h = await client.text_document_hover_async(T.HoverParams(
            text_document=T.TextDocumentIdentifier(uri=u), position=at(V2, needle, offset)))
        assert h is not None, needle
        return h.contents.value

    assert RELATION_DOCS["reachable"] in await hov("reachable(p, r)")
    assert DOMAIN_DOCS["robot"] in await hov("robot: reachable")
    assert (await hov("GAP)")).startswith("**const** `GAP`")
    assert "grounded(p) or exists q" in await hov("resting(p) and")
    r = await client.text_document_completion_async(T.CompletionParams(
        text_document=T.TextDocumentIdentifier(uri=u), position=at(V2, "robot: reachable")))
    labels = [i.label for i in r.items]
    assert "robot" in labels and "keepout" in labels
    r = await client.text_document_completion_async(T.CompletionParams(
        text_document=T.TextDocumentIdentifier(uri=u),
        position=T.Position(line=at(V2, "rule reach").line, character=0)))
    labels = [i.label for i in r.items]
    for word in ("const", "predicate", "GAP", "resting", "reachable"):
        assert word in labels
    bad = V2.replace("const GAP = 0.002\n", "").replace("resting(p) and", "resting(p, p) and")
    await change(client, u, bad, 2)
    await until(client, lambda: len(client.diagnostics.get(u, [])) >= 2)
    msgs = sorted(d.message for d in client.diagnostics[u])
    assert any("takes 1 argument(s), got 2" in m for m in msgs), msgs
    assert any("'GAP' is not a number or a known const" in m for m in msgs), msgs


LIB = 'rule tall "{p} is too tall: {p.top}" :\n    forall p in cube: p.top <= {H}\n'
EDITED = CELL.split("rule low")[0].replace(
    "import physical", 'import physical\nimport "lib.cell"') + """test two {
    layout {
        c1 cube at (0.40, 0.20, 0.025)
        c2 cube at (0.40, 0.20, 0.075)
    }
    order (c1, c2)
    expect pass
}
"""


async def test_edits_on_disk_and_in_the_buffer_give_the_new_verdict(client, files: Path):
    # one long-lived server: an imported file edited on disk, then the document edited in
    # the editor; each run sees the new rules (no result is reused across an edit)
    (files / "lib.cell").write_text(LIB.replace("{H}", "0.30"))
    path = files / "edited.cell"
    path.write_text(EDITED)
    u = await open_doc(client, path)

    async def run() -> tuple[str, list[str]]:
        out = await client.workspace_execute_command_async(T.ExecuteCommandParams(
            command="cellspec.runTest", arguments=[u, "two"]))
        (t,) = out["tests"]
        return t["status"], t.get("unexpected", [])

    assert await run() == ("passed", [])
    (files / "lib.cell").write_text(LIB.replace("{H}", "0.08"))  # c2's top is 0.1
    assert await run() == ("failed", ["tall(c2)"])
    change_to = EDITED.replace("    expect pass\n}", "    expect fail tall(c2)\n}")
    await change(client, u, change_to, 2)
    assert await run() == ("passed", [])
    (files / "lib.cell").write_text(LIB.replace("{H}", "0.30"))
    status, _ = await run()
    assert status == "failed"  # the expected violation is gone again

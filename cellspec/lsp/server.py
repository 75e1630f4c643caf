"""The pygls wiring of ``cellspec lsp``: diagnostics, hover, definition, symbols, completion,
formatting and a "run this test" code lens, over stdio.

Survives what an editor sends: diagnostics are debounced and computed off the event loop
(one at a time), every handler turns an exception into a logged message and an empty
answer, and unknown methods get pygls's MethodNotFound.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lsprotocol import types as T
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from cellspec import __version__
from cellspec.core.errors import CellspecError
from cellspec.core.status import TestStatus
from cellspec.dsl.formatter import FormatError, format_source
from cellspec.dsl.parser import parse_text
from cellspec.lsp import diagnose, framing, gitdiff, index
from cellspec.testing.runner import run_file

DEBOUNCE_S = 0.25
RUN_TEST = "cellspec.runTest"
RUN_FILE_TESTS = "cellspec.runFileTests"
log = logging.getLogger("cellspec.lsp")
_SEVERITY = {"error": T.DiagnosticSeverity.Error, "warning": T.DiagnosticSeverity.Warning,
             "information": T.DiagnosticSeverity.Information}
_SYMBOL_KINDS = {"cell": T.SymbolKind.Module, "rule": T.SymbolKind.Function,
                 "test": T.SymbolKind.Method, "import": T.SymbolKind.File,
                 "design": T.SymbolKind.Class, "commit": T.SymbolKind.Event,
                 "diagnose": T.SymbolKind.Event, "part": T.SymbolKind.Struct,
                 "robot": T.SymbolKind.Object, "keepout": T.SymbolKind.Constant,
                 "surface": T.SymbolKind.Constant, "supply": T.SymbolKind.Constant,
                 "panel": T.SymbolKind.Constant, "force": T.SymbolKind.Constant,
                 "inline": T.SymbolKind.Variable, "const": T.SymbolKind.Constant,
                 "predicate": T.SymbolKind.Function}
_COMPLETION_KINDS = {"keyword": T.CompletionItemKind.Keyword,
                     "relation": T.CompletionItemKind.Function,
                     "attribute": T.CompletionItemKind.Field,
                     "rule": T.CompletionItemKind.Reference, "part": T.CompletionItemKind.Struct,
                     "robot": T.CompletionItemKind.Value,
                     "keepout": T.CompletionItemKind.Constant,
                     "surface": T.CompletionItemKind.Constant,
                     "const": T.CompletionItemKind.Constant,
                     "predicate": T.CompletionItemKind.Function}


class CellServer(LanguageServer):
    """The language server and its per-document state."""

    def __init__(self) -> None:
        super().__init__("cellspec", __version__)
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cellspec-lsp")
        # the "stricter than HEAD" hints: a child process each, one at a time, never on
        # the diagnostics' thread
        self.diff_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cellspec-diff")
        self.hints: dict[str, list[gitdiff.Hint]] = {}  # uri -> hints of the saved file
        self.hint_runs: dict[str, int] = {}  # uri -> the latest run asked for
        self.tasks: set[asyncio.Task] = set()
        self.items: dict[str, list[diagnose.DiagnosticItem]] = {}  # uri -> last analysis
        self.results: dict[tuple[str, str], tuple[str, str]] = {}  # (uri, test) -> outcome
        self.ws = index.Workspace(self._text_of)

    def _text_of(self, path: Path) -> str | None:
        """An open document's buffer if the editor has it, else the file on disk."""
        uri = from_fs_path(str(path))
        if uri is not None and uri in self.workspace.text_documents:
            return self.workspace.get_text_document(uri).source
        return index._read_disk(path)

    def doc_index(self, uri: str) -> tuple[Any, index.DocIndex]:
        doc = self.workspace.get_text_document(uri)
        return doc, self.ws_index(doc)

    def ws_index(self, doc: Any) -> index.DocIndex:
        path = to_fs_path(doc.uri) or doc.uri
        return self.ws._cache.get((path, hash(doc.source))) or self._index(path, doc.source)

    def _index(self, path: str, text: str) -> index.DocIndex:
        idx = index.build_index(text, path)
        if len(self.ws._cache) > 256:
            self.ws._cache.clear()
        self.ws._cache[(path, hash(text))] = idx
        return idx


server = CellServer()


def _safe(default: Any = None):
    """Run a handler; a bug becomes a log message and ``default``, never a dead server."""
    def wrap(fn):
        if asyncio.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def run_async(ls: CellServer, *args: Any):
                try:
                    return await fn(ls, *args)
                except Exception as exc:
                    _report(ls, fn.__name__, exc)
                    return default
            return run_async

        @functools.wraps(fn)
        def run(ls: CellServer, *args: Any):
            try:
                return fn(ls, *args)
            except Exception as exc:
                _report(ls, fn.__name__, exc)
                return default
        return run
    return wrap


def _report(ls: CellServer, where: str, exc: Exception) -> None:
    log.error("%s: %s\n%s", where, exc, traceback.format_exc())
    try:
        ls.window_log_message(T.LogMessageParams(
            type=T.MessageType.Error,
            message=f"cellspec lsp: internal error in {where} (please report): "
            f"{type(exc).__name__}: {exc}"))
    except Exception:
        pass


# -- positions ------------------------------------------------------------------------------
def _pos_in(doc: Any, p: T.Position) -> tuple[int, int]:
    """A client position as 0-based (line, code point column)."""
    q = doc.position_codec.position_from_client_units(doc.lines, p)
    return q.line, q.character


def _range(codec: Any, lines: list[str], line: int, col: int, end_line: int, end_col: int
           ) -> T.Range:
    return codec.range_to_client_units(lines, T.Range(
        start=T.Position(line=line, character=col),
        end=T.Position(line=end_line, character=end_col)))


def _file_lines(ls: CellServer, path: str) -> list[str]:
    text = ls._text_of(Path(path)) or ""
    return text.splitlines(keepends=True) or [""]


# -- diagnostics ----------------------------------------------------------------------------
async def _publish(ls: CellServer, uri: str, version: int | None, debounce: float) -> None:
    if debounce:
        await asyncio.sleep(debounce)
    try:
        doc = ls.workspace.get_text_document(uri)
    except Exception:
        return
    if version is not None and doc.version != version:
        return  # a newer edit follows; its own run publishes
    text = doc.source
    path = to_fs_path(uri) or ""
    loop = asyncio.get_running_loop()
    items = await loop.run_in_executor(ls.pool, diagnose.analyse, text, path)
    doc = ls.workspace.text_documents.get(uri)
    if doc is None or (version is not None and doc.version != version):
        return
    ls.items[uri] = items
    _send(ls, doc)


def _send(ls: CellServer, doc: Any) -> None:
    """Publish the analysis of a document plus the outcomes of the tests run in it."""
    lines = doc.lines
    out = []
    for it in ls.items.get(doc.uri, []):
        out.append(T.Diagnostic(range=_range(doc.position_codec, lines, it.line, it.col,
                                             it.line, it.end_col),
                                message=it.message, severity=_SEVERITY[it.severity],
                                source="cellspec"))
    idx = ls.ws_index(doc)
    for s in idx.symbols:
        res = ls.results.get((doc.uri, s.name)) if s.kind == "test" else None
        if res is None:
            continue
        status, msg = res
        out.append(T.Diagnostic(
            range=_range(doc.position_codec, lines, s.name_line, s.name_col, s.name_line,
                         s.name_col + len(s.name)),
            message=f"test {s.name} {status}" + (f": {msg}" if msg else ""),
            severity=T.DiagnosticSeverity.Information if status == TestStatus.PASSED
            else T.DiagnosticSeverity.Error, source="cellspec test"))
    out.extend(_hint_diagnostics(ls, doc, idx))
    ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(
        uri=doc.uri, version=doc.version, diagnostics=out))


def _hint_diagnostics(ls: CellServer, doc: Any, idx: index.DocIndex) -> list[T.Diagnostic]:
    """The saved file's relation to HEAD, at each changed rule's name (Information)."""
    hints = ls.hints.get(doc.uri)
    if not hints:
        return []
    rules = {s.name: s for s in idx.symbols if s.kind == "rule"}
    cell = next((s for s in idx.symbols if s.kind == "cell"), None)
    out = []
    for h in hints:
        s = rules.get(h.rule) if h.rule else cell
        if s is None:
            s = cell  # a rule of an imported file: at the cell
        if s is None:
            continue
        msg = h.message if h.rule is None or h.rule in rules else f"rule {h.rule}: {h.message}"
        out.append(T.Diagnostic(
            range=_range(doc.position_codec, doc.lines, s.name_line, s.name_col, s.name_line,
                         s.name_col + len(s.name)),
            message=msg, severity=T.DiagnosticSeverity.Information, source="cellspec diff"))
    return out


def _start_hints(ls: CellServer, uri: str) -> None:
    """Compute the hints of the file as saved, in the background (open and save only)."""
    path = to_fs_path(uri)
    if not path:
        return
    run = ls.hint_runs.get(uri, 0) + 1
    ls.hint_runs[uri] = run
    task = asyncio.get_running_loop().create_task(_hints(ls, uri, path, run))
    ls.tasks.add(task)
    task.add_done_callback(ls.tasks.discard)


async def _hints(ls: CellServer, uri: str, path: str, run: int) -> None:
    try:
        loop = asyncio.get_running_loop()
        def fresh() -> list[gitdiff.Hint] | None:  # a run queued behind a later one: skipped
            return gitdiff.compute(path) if ls.hint_runs.get(uri) == run else None

        got = await loop.run_in_executor(ls.diff_pool, fresh)
        if got is None or ls.hint_runs.get(uri) != run:
            return  # a later save asked again
        doc = ls.workspace.text_documents.get(uri)
        if doc is None:
            return
        if got or ls.hints.get(uri):
            ls.hints[uri] = got
            _send(ls, doc)
    except Exception as exc:
        _report(ls, "diff hints", exc)


@server.feature(T.TEXT_DOCUMENT_DID_OPEN)
@_safe()
async def did_open(ls: CellServer, params: T.DidOpenTextDocumentParams) -> None:
    _start_hints(ls, params.text_document.uri)
    await _publish(ls, params.text_document.uri, params.text_document.version, 0)


@server.feature(T.TEXT_DOCUMENT_DID_CHANGE)
@_safe()
async def did_change(ls: CellServer, params: T.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    for k in [k for k in ls.results if k[0] == uri]:
        del ls.results[k]  # an edit makes old outcomes stale
    await _publish(ls, uri, params.text_document.version, DEBOUNCE_S)


@server.feature(T.TEXT_DOCUMENT_DID_SAVE)
@_safe()
async def did_save(ls: CellServer, params: T.DidSaveTextDocumentParams) -> None:
    _start_hints(ls, params.text_document.uri)
    await _publish(ls, params.text_document.uri, None, 0)


@server.feature(T.TEXT_DOCUMENT_DID_CLOSE)
@_safe()
def did_close(ls: CellServer, params: T.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.items.pop(uri, None)
    ls.hints.pop(uri, None)
    ls.hint_runs.pop(uri, None)
    ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


# -- hover, definition, symbols, completion ---------------------------------------------------
@server.feature(T.TEXT_DOCUMENT_HOVER)
@_safe()
def hover(ls: CellServer, params: T.HoverParams) -> T.Hover | None:
    doc, idx = ls.doc_index(params.text_document.uri)
    line, col = _pos_in(doc, params.position)
    found = index.hover(ls.ws, idx, line, col)
    if found is None:
        return None
    md, h = found
    return T.Hover(contents=T.MarkupContent(kind=T.MarkupKind.Markdown, value=md),
                   range=_range(doc.position_codec, doc.lines, h.line, h.start, h.line, h.end))


@server.feature(T.TEXT_DOCUMENT_DEFINITION)
@_safe()
def definition(ls: CellServer, params: T.DefinitionParams) -> list[T.Location] | None:
    doc, idx = ls.doc_index(params.text_document.uri)
    line, col = _pos_in(doc, params.position)
    out = []
    for path, ln, c, e in index.definition(ls.ws, idx, line, col):
        uri = from_fs_path(path) or path
        lines = doc.lines if uri == doc.uri else _file_lines(ls, path)
        out.append(T.Location(uri=uri, range=_range(doc.position_codec, lines, ln, c, ln, e)))
    return out or None


@server.feature(T.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
@_safe()
def symbols(ls: CellServer, params: T.DocumentSymbolParams) -> list[T.DocumentSymbol]:
    doc, idx = ls.doc_index(params.text_document.uri)
    codec, lines = doc.position_codec, doc.lines
    top: list[T.DocumentSymbol] = []
    by_name: dict[tuple[str, str], T.DocumentSymbol] = {}
    for s in idx.symbols:
        rng = _range(codec, lines, s.line, s.col, s.end_line, s.end_col)
        sel = _range(codec, lines, s.name_line, s.name_col, s.name_line,
                     s.name_col + len(s.name))
        detail = index.KIND_WORDS.get(s.kind, s.kind)
        ds = T.DocumentSymbol(name=s.name or "(unnamed)", kind=_SYMBOL_KINDS[s.kind],
                              range=rng, selection_range=sel, detail=detail, children=[])
        parent_kind = "cell" if s.kind not in ("inline",) else "test"
        parent = by_name.get((parent_kind, s.container or "")) if s.container else None
        if parent is not None:
            parent.children.append(ds)  # type: ignore[union-attr]
        else:
            top.append(ds)
            by_name[(s.kind, s.name)] = ds
    return top


@server.feature(T.TEXT_DOCUMENT_COMPLETION,
                T.CompletionOptions(trigger_characters=[".", "("]))
@_safe()
def completion(ls: CellServer, params: T.CompletionParams) -> T.CompletionList:
    doc, idx = ls.doc_index(params.text_document.uri)
    line, col = _pos_in(doc, params.position)
    items = [T.CompletionItem(label=label, kind=_COMPLETION_KINDS.get(kind),
                              detail=detail)
             for label, kind, detail in index.completions(ls.ws, idx, line, col)]
    return T.CompletionList(is_incomplete=False, items=items)


# -- formatting -----------------------------------------------------------------------------
@server.feature(T.TEXT_DOCUMENT_FORMATTING)
@_safe()
def formatting(ls: CellServer, params: T.DocumentFormattingParams) -> list[T.TextEdit] | None:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    text = doc.source
    try:
        parse_text(text, "<buffer>")  # like `cellspec fmt`: a broken file is not formatted
        new = format_source(text)
    except (CellspecError, FormatError) as exc:
        ls.window_show_message(T.ShowMessageParams(
            type=T.MessageType.Warning, message=f"cellspec fmt: not formatted: "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"))
        return None
    if new == text:
        return []
    lines = doc.lines
    end = T.Position(line=len(lines), character=0)
    return [T.TextEdit(range=T.Range(start=T.Position(line=0, character=0), end=end),
                       new_text=new)]


# -- run this test ----------------------------------------------------------------------------
@server.feature(T.TEXT_DOCUMENT_CODE_LENS)
@_safe()
def code_lens(ls: CellServer, params: T.CodeLensParams) -> list[T.CodeLens]:
    doc, idx = ls.doc_index(params.text_document.uri)
    out = []
    for s in idx.symbols:
        if s.kind != "test":
            continue
        res = ls.results.get((doc.uri, s.name))
        if res is None:
            title = "▶ run test"
        elif res[0] == TestStatus.PASSED:
            title = "✓ passed · run again"
        else:
            title = f"✗ {res[0]}: {res[1][:80]} · run again" if res[1] else f"✗ {res[0]}"
        rng = _range(doc.position_codec, doc.lines, s.line, s.col, s.line, s.col + 4)
        out.append(T.CodeLens(range=rng, command=T.Command(
            title=title, command=RUN_TEST, arguments=[doc.uri, s.name])))
    return out


def _run(text: str, path: str, name: str | None) -> dict:
    pattern = f"*::{name}" if name else None
    results, errors = run_file(path, pattern=pattern, text=text)
    return {"tests": [r.to_json() for r in results], "errors": [str(d) for d in errors]}


async def _run_command(ls: CellServer, args: list[Any], single: bool) -> dict:
    if not args or not isinstance(args[0], str) or (single and (
            len(args) < 2 or not isinstance(args[1], str))):
        return {"error": f"usage: {RUN_TEST} [uri, testName]" if single else
                f"usage: {RUN_FILE_TESTS} [uri]"}
    uri = args[0]
    doc = ls.workspace.text_documents.get(uri)
    path = to_fs_path(uri) or ""
    if doc is None:
        text = index._read_disk(Path(path)) if path else None
        if text is None:
            return {"error": f"no such document: {uri}"}
    else:
        text = doc.source
    name = args[1] if single else None
    loop = asyncio.get_running_loop()
    out = await loop.run_in_executor(ls.pool, _run, text, path, name)
    if single and not out["tests"] and not out["errors"]:
        out["error"] = f"no test named {name!r} in {uri}"
    for t in out["tests"]:
        ls.results[(uri, t["name"])] = (t["status"], t["message"])
    summary = ", ".join(f"{t['name']} {t['status']}" for t in out["tests"]) or \
        out.get("error") or "; ".join(out["errors"][:3])
    ls.window_show_message(T.ShowMessageParams(
        type=T.MessageType.Info if all(t["status"] == TestStatus.PASSED for t in out["tests"])
        and not out["errors"] and "error" not in out else T.MessageType.Warning,
        message=f"cellspec test: {summary}"))
    if doc is not None:
        _send(ls, doc)
    caps = ls.client_capabilities.workspace
    if caps and caps.code_lens and caps.code_lens.refresh_support:
        ls.workspace_code_lens_refresh(None)
    return out


@server.command(RUN_TEST)
@_safe(default={"error": "internal error"})
async def run_test(ls: CellServer, *args: Any) -> dict:
    return await _run_command(ls, _args(args), True)


@server.command(RUN_FILE_TESTS)
@_safe(default={"error": "internal error"})
async def run_file_tests(ls: CellServer, *args: Any) -> dict:
    return await _run_command(ls, _args(args), False)


def _args(args: tuple) -> list[Any]:
    """pygls passes command arguments spread or as one list, depending on version."""
    if len(args) == 1 and isinstance(args[0], list):
        return args[0]
    return list(args)


def serve() -> None:
    """Run the server on stdin/stdout until the client says exit (with cellspec's bounded,
    self-healing message loop: lsp/framing.py)."""
    framing.start_io(server)

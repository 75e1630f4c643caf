"""A tolerant index of a .cell document: declarations, imports and what a position refers to.

It scans the text with regular expressions (comments masked), so it works on a
half-typed file that textX cannot parse; hover, go to definition, symbols and
completion all come from here. Positions are 0-based (line, character) in code points.
"""

from __future__ import annotations

import bisect
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cellspec.core.io import TooLarge, read_bounded
from cellspec.core.ir import DOMAIN_DOCS, NUMERIC_ATTRS, RELATION_DOCS, RELATIONS, SYMBOL_ATTRS
from cellspec.dsl.parser import STDLIB, display_path, stdlib_path

MAX_INDEX_BYTES = 8 * 1024 * 1024  # larger documents get no index (the CLI refuses them too)
MAX_SYMBOLS = 5000
MAX_IMPORT_DEPTH = 16
NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_WORD = re.compile(NAME)
_MASK = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?(?:\*/|\Z)', re.S)
_STATEMENT = re.compile(r"^[ \t]*(import|cell|rule|test|design|commit|diagnose|const|predicate)\b",
                        re.M)
_ITEMS = {
    "part": re.compile(rf"^[ \t]*part[ \t]+({NAME})", re.M),
    "robot": re.compile(rf"^[ \t]*robot[ \t]+({NAME})", re.M),
    "keepout": re.compile(rf"^[ \t]*keepout[ \t]+({NAME})", re.M),
    "surface": re.compile(rf"^[ \t]*surface[ \t]+({NAME})", re.M),
    "supply": re.compile(rf"^[ \t]*supply[ \t]+({NAME})", re.M),
    "panel": re.compile(rf"^[ \t]*panel[ \t]+({NAME})", re.M),
    "force": re.compile(rf"^[ \t]*force[ \t]+({NAME})", re.M),
}
_INLINE_PART = re.compile(rf"^[ \t]*({NAME})[ \t]+({NAME})[ \t]+at\b", re.M)
_FILE_REF = re.compile(r'\b(import|layout|plan)[ \t]+"([^"\n]*)"')

KEYWORD_DOCS: dict[str, str] = {
    "import": "`import physical` (a standard library: physical, stability, diagnosis) or "
    "`import \"file.cell\"` (relative to this file): its rules, and its cell when this file "
    "has none, apply here",
    "cell": "`cell NAME { ... }`: the work cell: units, workspace, surfaces, part types, "
    "robots, grippers, keep-out zones, tolerances (one per file and its imports)",
    "rule": "`rule NAME \"message\" [severity error|warning|preference [weight W]] : EXPR`: "
    "violated wherever EXPR is false; the outer forall's variables name the violation's parts",
    "test": "`test NAME { layout ... order (...) expect pass | expect fail RULE(parts) ... "
    "[only] }`: a regression test run by `cellspec test`",
    "forall": "`forall p: ...` over parts; `forall p, q:` ordered distinct pairs; "
    "`forall {p, q}:` unordered pairs; `forall p in TYPE:`; `forall k in keepout:`; "
    "`forall r in robot:`",
    "exists": "`exists q: ...`: some part (other than the outer parts the body mentions)",
    "count": "`count(q: ...) >= N`: how many bindings satisfy the body",
    "implies": "`a implies b`: not a, or b (right-associative)",
    "and": "both hold", "or": "either holds", "not": "negation",
    "in": "restricts a quantifier: " + "; ".join(DOMAIN_DOCS.values()),
    "const": "`const NAME = NUMBER` (language version 2): a number in this file's units, "
    "usable wherever a number is allowed in rules, cells and tests, and in the files that "
    "import this one",
    "predicate": "`predicate NAME(p, q) : EXPR` (language version 2): a named condition, "
    "expanded where it is used (`forall p: NAME(p, p)`); it may not call itself",
    "severity": "`severity warning` reports the rule without failing the verdict; "
    "`severity preference [weight W]` makes it a weighted wish, scored and never failing",
    "preference": "`severity preference [weight W]`: a soft rule; each binding of its outer "
    "forall variables where the body is false costs W (default 1); `check` lists the unmet "
    "ones and prints `preferences: M of T weight met`, never failing the verdict",
    "weight": "`weight W` (after `severity preference`): what each violated binding of the "
    "preference costs, a positive whole number (default 1)",
    "preferences": "`expect preferences >= N` (or `<=`, `==`): the weight of preferences "
    "the test's layout meets, next to `expect pass` or `expect fail ...`",
    "error": "`severity error` (the default): a violation fails the verdict",
    "warning": "`severity warning`: reported, never fails the verdict",
    "expect": "`expect pass`, `expect fail RULE(parts...) ...` or `expect preferences >= N`: "
    "the verdict (or the preference score) the test expects",
    "pass": "the layout must have no error violation",
    "fail": "the listed violations must appear (with `only`, and no others)",
    "only": "no violation beyond the expected ones (warnings included)",
    "layout": "`layout { ID TYPE at (x, y, z) [size (...)] [yaw DEG] [gripper vacuum|parallel] "
    "... }` "
    "or `layout \"file.json\"`",
    "order": "`order (c1, c2, ...)`: the placement order (support_order, grip_access)",
    "robust": "`robust T`: Z3 proves the verdict holds for every x/y placement error up to T; "
    "`not robust T`: some displacement within T changes it",
    "plan": "`plan \"file.txt\"`: a RoCo-format multi-robot plan checked in the twin",
    "units": "`units m` or `units mm`: the unit of every length in this file",
    "workspace": "`workspace x [a, b] y [c, d] z [e, f]`: every part's box must lie inside",
    "surface": "`surface NAME z Z`: a horizontal surface parts may rest on (`grounded`)",
    "part": "`part NAME size (sx, sy, sz) [mass M]` or `part NAME cylinder radius R height H "
    "[mass M]`: a part type (a box, or a vertical cylinder)",
    "cylinder": "`part NAME cylinder radius R height H [mass M]`: a vertical cylinder (its "
    "size is its bounding box (2R, 2R, H); docs/shapes.md)",
    "radius": "`radius R`: a cylinder part type's radius",
    "height": "`height H`: a cylinder part type's height",
    "robot": "`robot NAME model MODEL base (x, y, z) [yaw DEG] [reach R] gripper ...` or "
    "`robot NAME urdf \"FILE.urdf\" tcp LINK [offset (x, y, z)] base ...`: a robot from its URDF",
    "urdf": "`urdf \"FILE.urdf\"`: the robot's own URDF, relative to the cell file",
    "tcp": "`tcp LINK`: the URDF link (the flange) the cell's gripper is attached to",
    "offset": "`offset (x, y, z)`: where on the tcp link the gripper is attached, metres",
    "gripper": "`gripper vacuum` or `gripper parallel [opening W] [depth D]`",
    "default": "`default gripper ...`: the gripper of parts that name none",
    "keepout": "`keepout NAME box x [..] y [..] z [..]` or `keepout NAME : x + y > 1.15`",
    "tolerance": "`tolerance contact EPS`: the contact tolerance eps of every relation",
    "friction": "`friction MU`: Coulomb friction coefficient (the stability rule)",
    "supply": "`supply NAME x [..] y [..] z [..]`: a feeder presenting parts (twin)",
    "trajectory": "`trajectory epsilon E`: δ(Q_plan, Q_exec) ≤ E radians (twin)",
    "home": "`home ROBOT (q1, q2, ...)`: home joint angles, radians (twin)",
    "shared": "`shared zone x [..] y [..] z [..]`: one arm at a time inside (scheduling)",
    "reachable": "`reachable ROBOT x [..] y [..] z [..]`: the box the robot's tool may reach",
    "panel": "`panel NAME at (x, y, z) size (sx, sy, sz)`: a named place on the table",
    "object": "`object NAME TYPE on PANEL goal PANEL`: a part to move (RoCo tasks)",
    "force": "`force NAME VALUE [for SECONDS]`: a force event threshold, newtons (world model)",
    "design": "`design NAME { STRUCTURE(params) [at (x, y)] [constraints] ... }`: "
    "a structure spec for `cellspec generate`",
    "commit": "`commit ACTION \"message\" : EXPR`: the condition to commit an action's effects",
    "diagnose": "`diagnose CAUSE(vars) \"message\" recover RECOVERY [priority N] : EXPR`",
    "vacuum": "suction gripper: needs the part's top free",
    "parallel": "two-finger gripper: needs both sides free along x or along y",
    "at": "a part's AABB centre", "size": "a box's size (sx, sy, sz)",
    "mass": "a part type's mass, kg", "base": "a robot's base position",
    "yaw": "degrees about the vertical axis (a robot's base, or a part in a test layout)",
    "reach": "a robot's reach radius from its base", "model": "a robot model name",
    "opening": "the parallel gripper's maximum opening", "depth": "finger depth below the top",
    "true": "the constant true", "false": "the constant false",
}
KEYWORDS = tuple(KEYWORD_DOCS)
PLACEHOLDER_DOCS = "`{p}`, `{p.top}`, `{overlap(p, q)}`, `{gap(p)}`, `{outside(p)}`, " \
    "`{intrusion(p, k)}`, `{blockers(p)}`"


@dataclass(frozen=True)
class Symbol:
    """A declaration: its name's position and the whole statement's span (0-based)."""

    name: str
    kind: str  # cell rule test import design commit diagnose part robot keepout ... inline
    line: int
    col: int
    end_line: int
    end_col: int
    name_line: int
    name_col: int
    text: str
    container: str | None = None
    path: str = ""


@dataclass(frozen=True)
class FileRef:
    """A quoted path after ``import``, ``layout`` or ``plan``: where it is, what it names."""

    kind: str
    target: str
    line: int
    col: int
    end_col: int


def mask_code(text: str) -> str:
    """The text with comments and string contents blanked (quotes and newlines kept), so
    offsets stay the same and what is left is code."""
    def blank(m: re.Match[str]) -> str:
        g = m.group(0)
        if g[0] == '"':
            return '"' + _blank(g[1:-1]) + '"' if len(g) > 1 else g
        return _blank(g)
    return _MASK.sub(blank, text)


def _blank(s: str) -> str:
    return " " * len(s) if "\n" not in s else re.sub(r"[^\n]", " ", s)


class _Lines:
    def __init__(self, text: str):
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def pos(self, offset: int) -> tuple[int, int]:
        k = bisect.bisect_right(self.starts, offset) - 1
        return k, offset - self.starts[k]


@dataclass
class DocIndex:
    """Declarations and file references of one document."""

    path: str
    text: str
    symbols: list[Symbol] = field(default_factory=list)
    refs: list[FileRef] = field(default_factory=list)
    imports: list[tuple[FileRef | None, str]] = field(default_factory=list)  # (ref, file)
    truncated: bool = False

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n")


def build_index(text: str, path: str) -> DocIndex:
    """Index one document's text (no I/O): statements, cell items, test parts, file refs."""
    idx = DocIndex(path=path, text=text)
    if len(text) > MAX_INDEX_BYTES:
        idx.truncated = True
        return idx
    code = mask_code(text)
    lines = _Lines(text)
    starts = [m.start(1) for m in _STATEMENT.finditer(code)] + [len(text)]
    stmts = []
    for a, b in zip(starts, starts[1:], strict=False):
        end = a + len(code[a:b].rstrip())
        stmts.append((a, end))
    cell_name = None
    for a, end in stmts:
        kw = _WORD.match(code, a)
        assert kw is not None
        word = kw.group(0)
        sl, sc = lines.pos(a)
        el, ec = lines.pos(end)
        if word == "import":
            m = re.compile(rf'import[ \t]+(?:"([^"\n]*)"|({NAME}))').match(code, a)
            if m:
                g = 1 if m.group(1) is not None else 2
                name = text[m.start(g):m.end(g)]
                nl, nc = lines.pos(m.start(g))
                idx.symbols.append(Symbol(name, "import", sl, sc, el, ec, nl, nc,
                                          text[a:end], path=path))
                ref = FileRef("import", name if m.group(1) is not None else "std:" + name,
                              nl, nc, nc + len(name))
                idx.imports.append((ref, name))
            continue
        pat = {"diagnose": rf"diagnose[ \t\n]+({NAME})", "commit": rf"commit[ \t\n]+({NAME})"}
        m = re.compile(pat.get(word, rf"{word}[ \t\n]+({NAME})")).match(code, a)
        if not m:
            continue
        name = m.group(1)
        nl, nc = lines.pos(m.start(1))
        idx.symbols.append(Symbol(name, word, sl, sc, el, ec, nl, nc, text[a:end], path=path))
        if word == "cell":
            cell_name = name
            body = code[a:end]
            for kind, rx in _ITEMS.items():
                for im in rx.finditer(body):
                    o = a + im.start(0) + len(im.group(0)) - len(im.group(0).lstrip())
                    line_end = text.find("\n", o)
                    line_end = end if line_end < 0 or line_end > end else line_end
                    il, ic = lines.pos(o)
                    _, iec = lines.pos(line_end)
                    inl, inc = lines.pos(a + im.start(1))
                    idx.symbols.append(Symbol(im.group(1), kind, il, ic, il, iec, inl, inc,
                                              text[o:line_end].rstrip(), cell_name, path))
        elif word == "test":
            body = code[a:end]
            for im in _INLINE_PART.finditer(body):
                o = a + im.start(1)
                line_end = text.find("\n", o)
                line_end = end if line_end < 0 or line_end > end else line_end
                il, ic = lines.pos(o)
                _, iec = lines.pos(line_end)
                idx.symbols.append(Symbol(im.group(1), "inline", il, ic, il, iec, il, ic,
                                          text[o:line_end].rstrip(), name, path))
        if len(idx.symbols) > MAX_SYMBOLS:
            idx.truncated = True
            break
    for m in _FILE_REF.finditer(code):
        if m.group(1) == "import":
            continue
        ln, c = lines.pos(m.start(2))
        target = text[m.start(2):m.end(2)]
        idx.refs.append(FileRef(m.group(1), target, ln, c, c + len(target)))
    idx.refs.extend(r for r, _ in idx.imports if r is not None)
    return idx


def resolve(ref: FileRef, base: str) -> Path | None:
    """The file a reference names (a standard library, or relative to ``base``'s folder)."""
    if ref.target.startswith("std:"):
        name = ref.target[4:]
        return stdlib_path(name) if name in STDLIB else None
    return (Path(base).parent / ref.target).resolve()


TextSource = Callable[[Path], str | None]


def _read_disk(path: Path) -> str | None:
    """A file's text, or None: not a regular file (``/dev/zero``, a FIFO that would block
    the server), over MAX_INDEX_BYTES, or unreadable. At most limit + 1 bytes are read (a
    size check alone races with the file growing)."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None
        return read_bounded(path, MAX_INDEX_BYTES).decode("utf-8", errors="replace")
    except (OSError, TooLarge):
        return None


class Workspace:
    """Indexes of documents and of the files they import (open documents win over disk)."""

    def __init__(self, source: TextSource | None = None):
        self.source = source or _read_disk
        self._cache: dict[tuple[str, int], DocIndex] = {}

    def index_file(self, path: Path) -> DocIndex | None:
        text = self.source(path)
        if text is None:
            return None
        key = (str(path), hash(text))
        if key not in self._cache:
            if len(self._cache) > 256:
                self._cache.clear()
            self._cache[key] = build_index(text, str(path))
        return self._cache[key]

    def closure(self, idx: DocIndex) -> list[DocIndex]:
        """The document and every file it imports, transitively (cycles and missing files
        are skipped: the diagnostics report them)."""
        out = [idx]
        seen = {str(Path(idx.path).resolve())}
        todo = [(idx, 0)]
        while todo:
            cur, depth = todo.pop(0)
            if depth >= MAX_IMPORT_DEPTH:
                continue
            for ref, _ in cur.imports:
                if ref is None:
                    continue
                target = resolve(ref, cur.path)
                if target is None or str(target) in seen:
                    continue
                seen.add(str(target))
                sub = self.index_file(target)
                if sub is not None:
                    out.append(sub)
                    todo.append((sub, depth + 1))
        return out

    def find(self, idx: DocIndex, name: str, kinds: set[str] | None = None) -> list[Symbol]:
        """Declarations named ``name`` (of the given kinds) in the document and its imports."""
        return [s for d in self.closure(idx) for s in d.symbols
                if s.name == name and (kinds is None or s.kind in kinds)]


@dataclass(frozen=True)
class Here:
    """What the cursor is on: a word (with its span) in a syntactic context."""

    word: str
    line: int
    start: int
    end: int
    context: str  # attr call ref string keyword
    var: str = ""  # for attr: the variable before the dot
    ref: FileRef | None = None


def here(idx: DocIndex, line: int, char: int) -> Here | None:
    """The word or quoted path at a position, with its context; None on whitespace."""
    lines = idx.lines
    if line < 0 or line >= len(lines):
        return None
    row = lines[line]
    for r in idx.refs:
        if r.line == line and r.col <= char <= r.end_col:
            return Here(r.target, line, r.col, r.end_col, "string", ref=r)
    code_row = mask_code(row) if '"' in row or "/" in row else row
    for m in _WORD.finditer(code_row):
        if m.start() <= char <= m.end():
            w = m.group(0)
            before = code_row[:m.start()].rstrip()
            after = code_row[m.end():].lstrip()
            if before.endswith("."):
                path_m = re.search(rf"({NAME})((?:\.{NAME})*)\.$", before)
                var = path_m.group(1) if path_m else ""
                sub = path_m.group(2).lstrip(".") if path_m else ""
                return Here(f"{sub}.{w}" if sub else w, line, m.start(), m.end(), "attr", var)
            if after.startswith("(") and (w not in KEYWORD_DOCS or w in RELATIONS):
                return Here(w, line, m.start(), m.end(), "call")
            if w in KEYWORD_DOCS and not after.startswith("."):
                return Here(w, line, m.start(), m.end(), "keyword")
            return Here(w, line, m.start(), m.end(), "ref")
    return None


def _where(s: Symbol) -> str:
    return f"{display_path(s.path)}:{s.name_line + 1}:{s.name_col + 1}"


def _code(text: str, most: int = 12) -> str:
    rows = text.split("\n")
    more = "\n    ..." if len(rows) > most else ""
    return "```cellspec\n" + "\n".join(rows[:most]) + more + "\n```"


KIND_WORDS = {"rule": "rule", "test": "test", "cell": "cell", "part": "part type",
              "robot": "robot", "keepout": "keep-out zone", "surface": "surface",
              "supply": "supply area", "panel": "panel", "force": "force threshold",
              "design": "design", "commit": "commit condition", "diagnose": "diagnosis rule",
              "import": "import", "inline": "test part", "const": "const",
              "predicate": "predicate"}


def hover(ws: Workspace, idx: DocIndex, line: int, char: int) -> tuple[str, Here] | None:
    """Markdown describing what is at the position, and the span it describes."""
    h = here(idx, line, char)
    if h is None:
        return None
    if h.context == "string" and h.ref is not None:
        target = resolve(h.ref, idx.path)
        if target is None:
            return f"unknown standard library `{h.ref.target[4:]}`", h
        state = "" if target.exists() else " (**not found**)"
        return f"{h.ref.kind}: `{target}`{state}", h
    if h.context == "attr":
        if h.word in NUMERIC_ATTRS:
            return f"`{h.var}.{h.word}`: {NUMERIC_ATTRS[h.word]} (a length, metres)", h
        if h.word in SYMBOL_ATTRS:
            return f"`{h.var}.{h.word}`: {SYMBOL_ATTRS[h.word]}", h
        return f"`{h.word}` is no attribute (known: {', '.join(_attrs())})", h
    if h.context == "call" and h.word in RELATIONS:
        args = ", ".join(RELATIONS[h.word])
        return f"**relation** `{h.word}({args})`\n\n{RELATION_DOCS.get(h.word, '')}", h
    if h.word in DOMAIN_DOCS and re.search(r"\bin\s*$", idx.lines[line][:h.start]):
        return f"**domain** `{h.word}`: {DOMAIN_DOCS[h.word]}", h  # `forall r in robot`
    if h.context == "keyword" and not ws.find(idx, h.word):
        return f"**{h.word}**: {KEYWORD_DOCS[h.word]}", h
    syms = ws.find(idx, h.word, None)
    syms = [s for s in syms if s.kind != "import"]
    if syms:
        # a test's own parts shadow nothing else: prefer declarations in the enclosing test
        s = _best(syms, idx, h)
        what = KIND_WORDS.get(s.kind, s.kind)
        extra = f" (in {s.container})" if s.container and s.kind == "inline" else ""
        return f"**{what}** `{s.name}`{extra} — {_where(s)}\n\n{_code(s.text)}", h
    if h.word in RELATIONS:
        return f"**relation** `{h.word}({', '.join(RELATIONS[h.word])})`\n\n" \
            f"{RELATION_DOCS.get(h.word, '')}", h
    if h.word == "workspace":
        return f"`workspace`: {KEYWORD_DOCS['workspace']}", h
    return None


def _best(syms: list[Symbol], idx: DocIndex, h: Here) -> Symbol:
    test = enclosing(idx, h.line, "test")
    for s in syms:
        if s.kind == "inline" and test is not None and s.container == test.name \
                and s.path == idx.path:
            return s
    non_inline = [s for s in syms if s.kind != "inline"]
    return (non_inline or syms)[0]


def enclosing(idx: DocIndex, line: int, kind: str) -> Symbol | None:
    """The top-level statement of ``kind`` whose span holds ``line``."""
    for s in idx.symbols:
        if s.kind == kind and s.line <= line <= s.end_line:
            return s
    return None


def definition(ws: Workspace, idx: DocIndex, line: int, char: int
               ) -> list[tuple[str, int, int, int]]:
    """Where the thing at the position is declared: (path, line, col, end_col) each."""
    h = here(idx, line, char)
    if h is None:
        return []
    if h.context == "string" and h.ref is not None:
        target = resolve(h.ref, idx.path)
        return [(str(target), 0, 0, 0)] if target is not None and target.exists() else []
    if h.context in ("attr", "keyword"):
        return []
    syms = [s for s in ws.find(idx, h.word, None) if s.kind != "import"]
    if not syms:
        return []
    if any(s.kind == "inline" for s in syms):
        best = _best(syms, idx, h)
        if best.kind == "inline":
            return [(best.path, best.name_line, best.name_col, best.name_col + len(best.name))]
    return [(s.path, s.name_line, s.name_col, s.name_col + len(s.name)) for s in syms
            if s.kind != "inline"]


def _attrs() -> list[str]:
    return sorted({a.split(".")[0] for a in NUMERIC_ATTRS} | set(SYMBOL_ATTRS))


def completions(ws: Workspace, idx: DocIndex, line: int, char: int
                ) -> list[tuple[str, str, str]]:
    """Candidates at the position: (label, kind, detail); attributes after a dot, rule names
    after ``expect fail``, otherwise keywords, relations and the file's names."""
    lines = idx.lines
    row = lines[line] if 0 <= line < len(lines) else ""
    before = row[:char]
    out: list[tuple[str, str, str]] = []
    m = re.search(rf"({NAME})((?:\.{NAME})*)\.({NAME})?$", before)
    if m:
        if m.group(2) == ".size":
            return [(a, "attribute", NUMERIC_ATTRS[f"size.{a}"]) for a in "xyz"]
        return [(a, "attribute", NUMERIC_ATTRS.get(a, SYMBOL_ATTRS.get(a, "size.x, size.y, "
                 "size.z")) ) for a in _attrs()]
    syms = [s for d in ws.closure(idx) for s in d.symbols]
    in_expect = re.search(r"\bexpect\s+fail\b", "\n".join(lines[max(0, line - 3):line] + [before]))
    rules = sorted({s.name for s in syms if s.kind == "rule"})
    if in_expect:
        out += [(r, "rule", "rule") for r in rules]
    if re.search(rf"\bin\s+({NAME})?$", before):
        out += [(s.name, "part", "part type") for s in syms if s.kind == "part"]
        out.append(("keepout", "keyword", DOMAIN_DOCS["keepout"]))
        out.append(("robot", "keyword", DOMAIN_DOCS["robot"]))
        return _dedupe(out)
    out += [(k, "keyword", KEYWORD_DOCS[k]) for k in KEYWORDS]
    out += [(r, "relation", f"{r}({', '.join(a)})") for r, a in RELATIONS.items()]
    kinds = {"part": "part type", "robot": "robot", "keepout": "keep-out zone",
             "surface": "surface", "const": "const", "predicate": "predicate"}
    out += [(s.name, s.kind, kinds[s.kind]) for s in syms if s.kind in kinds]
    if not in_expect:
        out += [(r, "rule", "rule") for r in rules]
    return _dedupe(out)


def _dedupe(items: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    seen: set[str] = set()
    out = []
    for it in items:
        if it[0] not in seen:
            seen.add(it[0])
            out.append(it)
    return out

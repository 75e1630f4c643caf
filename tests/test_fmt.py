"""Tests for the canonical .cell formatter: idempotence, comments, safety check, errors."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cellspec.dsl import formatter
from cellspec.dsl.formatter import (
    FormatError,
    check_roundtrip,
    format_file,
    format_source,
    tokenize,
)

STATION = """\
import physical
cell station { units m
  workspace x [0.20, 0.70] y [0.05, 0.50] z [0.00, 0.30]
  surface table z 0
  part cube size (0.05,0.05,0.05) mass 0.1
  robot irb120 model abb_irb120 base (0, 0.275, 0) reach 0.58 gripper vacuum
  robot irb1600 model abb_irb1600 base (0.95, 0.275, 0) yaw 180 reach 1.2 \
gripper parallel opening 0.07 depth 0.02
  default gripper parallel
  keepout post box x [0.6,0.7] y [0.45,0.5] z [0,0.3]
  keepout corner : x + 2*y > 0.7
  tolerance contact 0.001 }
rule max_h "{p} too high" severity warning : forall p: p.top <= 0.25
rule no_overlap "x" : forall {p, q}: not overlaps(p, q)
test t1 { layout { c1 cube at (0.4, 0.2, 0.025) c2 cube at (0.4,0.2,0.075) \
size (0.05,0.05,0.05) } order (c1, c2) expect fail gravity(c2) no_overlap(c1, c2) only }
test t2 { layout "a.json" expect pass }
"""

STATION_FORMATTED = """\
import physical

cell station {
    units m
    workspace x [0.20, 0.70] y [0.05, 0.50] z [0.00, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    robot irb120 model abb_irb120 base (0, 0.275, 0) reach 0.58 gripper vacuum
    robot irb1600 model abb_irb1600 base (0.95, 0.275, 0) yaw 180 reach 1.2 \
gripper parallel opening 0.07 depth 0.02
    default gripper parallel
    keepout post box x [0.6, 0.7] y [0.45, 0.5] z [0, 0.3]
    keepout corner : x + 2 * y > 0.7
    tolerance contact 0.001
}

rule max_h "{p} too high" severity warning : forall p: p.top <= 0.25

rule no_overlap "x" : forall {p, q}: not overlaps(p, q)

test t1 {
    layout {
        c1 cube at (0.4, 0.2, 0.025)
        c2 cube at (0.4, 0.2, 0.075) size (0.05, 0.05, 0.05)
    }
    order (c1, c2)
    expect fail gravity(c2) no_overlap(c1, c2)
    only
}

test t2 {
    layout "a.json"
    expect pass
}
"""

COMMENTED = """\
/* physical.cell: the standard rules
   (block comment spanning lines) */
// second header line

import physical   // the standard library
import "local.cell"
// the cell under test
cell station{units mm // millimetres!
  /* inline */ surface table z -0.5
   part robot size(50,50,50)


  robot r1 model part base (+0, -1 ,.5) yaw -90 gripper vacuum
  keepout k:-2*x - y>=-1.5
  // last item
}
rule tall "{p} is tall" severity error:
   forall p:   // every part
     p.top>-1 and - p.bottom < 2 - -1
     // inside the body
     or count( { p , q } in parts : p.x == q.x ) != 0
rule r2 'm' : forall p: not (p.x < 0) implies exists q: near(p,q)


test t { layout { }
  // before expect
  expect fail tall(c1) }
test t3 {}
// end of file
"""

OTHERS = [
    "rule a 'x' : forall p in parts: (p.x + 1) * 2 >= -(p.y) and true",
    "cell c { units m }\n\n\n\nimport x\nimport y\n\n\nimport z",
    "cell c // why\n{ units m } rule a // hm\n 'x' : 1 > 0",
    "test t { layout { a b at (1,2,3) gripper vacuum gripper b at (0,0,0) } }",
    'rule a "x" : 1 > 0 /* trailing block */ rule b "y" : 2 > 1',
    "",
    "// nothing but a comment",
]


@pytest.mark.parametrize("source", [STATION, COMMENTED, STATION_FORMATTED, *OTHERS])
def test_idempotent(source: str) -> None:
    once = format_source(source)
    assert format_source(once) == once


def test_station_exact() -> None:
    assert format_source(STATION) == STATION_FORMATTED


def test_small_messy_exact() -> None:
    messy = (
        'import  physical\n\n\n\nrule   r1   "m"   :forall p :p.x>=-0.50\t\n'
        "cell c{units m part cube size(0.05 ,0.05,0.05)}   "
    )
    assert format_source(messy) == (
        "import physical\n"
        "\n"
        'rule r1 "m" : forall p: p.x >= -0.50\n'
        "\n"
        "cell c {\n"
        "    units m\n"
        "    part cube size (0.05, 0.05, 0.05)\n"
        "}\n"
    )


def _comments(text: str) -> list[str]:
    return [t.text.rstrip() for t in tokenize(text) if t.kind == "comment"]


def test_comments_preserved_verbatim() -> None:
    out = format_source(COMMENTED)
    assert _comments(out) == _comments(COMMENTED)
    for comment in _comments(COMMENTED):
        assert comment in out
    lines = out.splitlines()
    assert lines[0] == "/* physical.cell: the standard rules"
    assert lines[1] == "   (block comment spanning lines) */"
    assert "import physical // the standard library" in lines
    assert "    units mm // millimetres!" in lines
    assert "    forall p: // every part" in lines
    assert "    // inside the body" in lines
    assert "    // last item" in lines
    assert lines[-1] == "// end of file"
    assert out.endswith("// end of file\n")


def test_commented_exact() -> None:
    assert (
        format_source(COMMENTED)
        == """\
/* physical.cell: the standard rules
   (block comment spanning lines) */
// second header line

import physical // the standard library
import "local.cell"

// the cell under test
cell station {
    units mm // millimetres!
    /* inline */
    surface table z -0.5
    part robot size (50, 50, 50)

    robot r1 model part base (+0, -1, .5) yaw -90 gripper vacuum
    keepout k : -2 * x - y >= -1.5
    // last item
}

rule tall "{p} is tall" severity error :
    forall p: // every part
    p.top > -1 and -p.bottom < 2 - -1
    // inside the body
    or count({p, q} in parts: p.x == q.x) != 0

rule r2 'm' : forall p: not (p.x < 0) implies exists q: near(p, q)

test t {
    layout {}
    // before expect
    expect fail tall(c1)
}

test t3 {}

// end of file
"""
    )


def test_rule_body_line_breaks_kept() -> None:
    src = 'rule r "m" :\nforall p:\n        p.x > 0\n\n\n  and p.y > 0'
    # continuation lines get at least 4 spaces; a deeper indent the author chose is kept
    assert format_source(src) == 'rule r "m" :\n    forall p:\n        p.x > 0\n    and p.y > 0\n'


def test_comment_under_rule_body_stays_in_body() -> None:
    src = "rule a 'x' :\n  1 > 0\n  // still the body\n// next rule\nrule b 'y' : 1 > 0"
    assert format_source(src) == (
        "rule a 'x' :\n    1 > 0\n    // still the body\n\n// next rule\nrule b 'y' : 1 > 0\n"
    )


def test_numbers_written_as_given() -> None:
    out = format_source("cell c { surface t z 0.000 part p size (1e-2, 5., .5) mass +1.50 }")
    assert "surface t z 0.000" in out
    assert "part p size (1e-2, 5., .5) mass +1.50" in out


def test_roundtrip_accepts_whitespace_changes() -> None:
    check_roundtrip('rule r "m" : forall p: p.x > 0', 'rule r "m":\n  forall p :p.x>0 // c')


def test_roundtrip_catches_meaning_change() -> None:
    with pytest.raises(FormatError, match="meaning") as info:
        check_roundtrip(
            'rule r "m" : forall p: p.top <= 0.25', 'rule r "m" : forall p: p.top < 0.25'
        )
    assert "op" in str(info.value)
    with pytest.raises(FormatError, match="meaning"):
        check_roundtrip(STATION, STATION.replace("mass 0.1", "mass 0.10"))


def test_format_source_refuses_a_meaning_change(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: object) -> str:
        return 'rule r "m" : 1 > 2\n'

    monkeypatch.setattr(formatter._Emitter, "run", broken)
    with pytest.raises(FormatError, match="meaning"):
        format_source('rule r "m" : 1 > 0')


def test_syntax_error_has_line_and_col() -> None:
    with pytest.raises(FormatError) as info:
        format_source("cell c {\n  units km\n}\n")
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.line, err.col) == (2, 9)
    assert str(err).startswith("2:9:")


def test_format_file_syntax_error_names_file(tmp_path) -> None:
    path = tmp_path / "bad.cell"
    path.write_text("rule r : 1 > 0\n")
    with pytest.raises(FormatError) as info:
        format_file(path)
    assert str(info.value).startswith(f"{path}:1:8:")
    assert info.value.filename == str(path)


def test_crlf_becomes_lf(tmp_path) -> None:
    crlf = STATION.replace("\n", "\r\n")
    assert format_source(crlf) == STATION_FORMATTED
    path = tmp_path / "station.cell"
    path.write_bytes(crlf.encode())
    text, changed = format_file(path)
    assert changed and text == STATION_FORMATTED and "\r" not in text
    path.write_bytes(STATION_FORMATTED.encode())
    assert format_file(path) == (STATION_FORMATTED, False)
    path.write_bytes(STATION_FORMATTED.replace("\n", "\r\n").encode())
    assert format_file(path) == (STATION_FORMATTED, True)


def test_no_trailing_whitespace_single_final_newline() -> None:
    out = format_source(STATION.replace("\n", "   \n") + "\n\n\n")
    assert out == STATION_FORMATTED
    assert all(line == line.rstrip() for line in out.splitlines())


# -- whitespace perturbation -----------------------------------------------------------

_WORDLIKE = {"name", "num", "str"}
_TOKENS = tokenize(STATION)
_WS = [" ", "", "  ", "\t", "\n", " \n  ", "\r\n\t", "   "]


def _gap_kinds() -> list[tuple[bool, bool, str | None]]:
    """Per gap before token k: (needs a space, newline allowed, fixed whitespace or None)."""
    kinds: list[tuple[bool, bool, str | None]] = []
    stmt, body, expect = None, False, False
    for k, tok in enumerate(_TOKENS):
        if k == 0:
            kinds.append((False, True, None))
        else:
            prev = _TOKENS[k - 1]
            if prev.text in ("+", "-"):
                # a sign's gap decides unary vs binary spelling; keep it as written
                fixed = "" if _adjacent(prev, tok) else " "
                kinds.append((False, False, fixed))
            else:
                needs = prev.kind in _WORDLIKE and tok.kind in _WORDLIKE
                newline_ok = not (body and not (tok.kind == "name" and tok.text in formatter._TOP))
                # line breaks before a rule name in an `expect fail` list are kept on purpose
                nxt = _TOKENS[k + 1].text if k + 1 < len(_TOKENS) else ""
                if expect and tok.kind == "name" and nxt == "(":
                    newline_ok = False
                kinds.append((needs, newline_ok, None))
        if tok.kind == "name" and tok.text in formatter._TOP:
            stmt, body, expect = tok.text, False, False
        elif stmt == "rule" and tok.text == ":":
            body = True
        elif stmt == "test" and tok.text == "expect":
            expect = True
        elif stmt == "test" and tok.text in ("only", "}", "layout", "order"):
            expect = False
    return kinds


def _adjacent(a: formatter.Token, b: formatter.Token) -> bool:
    return a.line == b.line and a.col + len(a.text) == b.col


_GAPS = _gap_kinds()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_WS), min_size=len(_TOKENS) + 1, max_size=len(_TOKENS) + 1))
def test_whitespace_perturbation_gives_same_output(choices: list[str]) -> None:
    parts: list[str] = []
    for (needs, newline_ok, fixed), tok, ws in zip(_GAPS, _TOKENS, choices, strict=False):
        if fixed is not None:
            ws = fixed
        else:
            if not newline_ok:
                ws = ws.replace("\r\n", " ").replace("\n", " ")
            if needs and not ws:
                ws = " "
        parts.append(ws + tok.text)
    parts.append(choices[-1])
    perturbed = "".join(parts)
    assert format_source(perturbed) == STATION_FORMATTED


def test_shipped_rule_files_are_canonical() -> None:
    """Every rule file we ship is already in the canonical style (fmt is a fixed point)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    files = sorted((root / "rules").rglob("*.cell")) + sorted((root / "cellspec" / "rules")
                                                              .glob("*.cell"))
    assert files
    for f in files:
        text = f.read_text(encoding="utf-8")
        assert format_source(text) == text, f"{f} is not canonical: run `cellspec fmt {f}`"


def test_design_blocks_format_canonically() -> None:
    messy = ("design d {tower( n = 3 ) at(0.40,0.20) [max height 0.2 , count 3]\n"
             "  wall(width=3,height=2,along=x) at (0.3, -0.1)\n keep clear :x + y > 1.1 }")
    want = ("design d {\n    tower(n=3) at (0.40, 0.20) [max height 0.2, count 3]\n"
            "    wall(width=3, height=2, along=x) at (0.3, -0.1)\n"
            "    keep clear : x + y > 1.1\n}\n")
    assert format_source(messy) == want
    assert format_source(want) == want


# --- language version 2 ----------------------------------------------------------------

V2_MESSY = """const   W=0.05
const N =2
predicate   resting( p ):grounded(p) or exists q:supports(q,p)
predicate apart(p,q) :
  not near(p,q,W)
cell t {
    workspace x [0, 1] y [0, 1] z [0, 1]
    surface table z 0
    part cube size (W,W, W)
    robot arm model panda base (0, 0, 0) reach 0.5 gripper vacuum
}
rule rest "{p} floats":forall p: resting(p)
rule reach "{p} is out of reach":forall p:exists r in robot:reachable(p,r)
rule spaced "{p} {q}" : forall {p,q}: apart(p,q) or count(r in robot: reachable(p,r))>=N
"""

V2_FORMATTED = """const W = 0.05
const N = 2

predicate resting(p) : grounded(p) or exists q: supports(q, p)

predicate apart(p, q) :
    not near(p, q, W)

cell t {
    workspace x [0, 1] y [0, 1] z [0, 1]
    surface table z 0
    part cube size (W, W, W)
    robot arm model panda base (0, 0, 0) reach 0.5 gripper vacuum
}

rule rest "{p} floats" : forall p: resting(p)

rule reach "{p} is out of reach" : forall p: exists r in robot: reachable(p, r)

rule spaced "{p} {q}" : forall {p, q}: apart(p, q) or count(r in robot: reachable(p, r)) >= N
"""


def test_version2_exact_and_stable() -> None:
    assert format_source(V2_MESSY) == V2_FORMATTED
    assert format_source(V2_FORMATTED) == V2_FORMATTED


def test_version2_formatted_file_means_the_same(tmp_path) -> None:
    """fmt of a v2 file parses to the same IR (the rules, consts and cell it builds)."""
    import cellspec

    a, b = tmp_path / "a.cell", tmp_path / "b.cell"
    a.write_text(V2_MESSY)
    b.write_text(format_source(V2_MESSY))
    ca, cb = cellspec.load_cell(str(a)), cellspec.load_cell(str(b))
    assert [(r.name, r.body) for r in ca.rules] == [(r.name, r.body) for r in cb.rules]
    assert ca.part_types["cube"].size == cb.part_types["cube"].size  # W resolved alike


def test_version2_roundtrip_catches_a_changed_const() -> None:
    with pytest.raises(FormatError, match="meaning"):
        check_roundtrip(V2_FORMATTED, V2_FORMATTED.replace("const W = 0.05", "const W = 0.5"))

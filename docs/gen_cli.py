"""Write docs/cli.md from the argparse definitions of every verb, so the reference cannot go
stale: ``python docs/gen_cli.py`` rewrites it, ``python docs/gen_cli.py --check`` exits 1
when the checked-in page differs (tests/test_docs.py runs the same comparison)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(HERE.parent))

from cellspec.cli import build_parser  # noqa: E402

PAGE = HERE / "cli.md"
HEADER = """\
# Command-line reference

Generated from the argument parser by `python docs/gen_cli.py` (do not edit by hand; a
test fails when this page and the parser differ). The guides explain the verbs: see the
[README](../README.md) for the map. Exit codes for every verb: 0 clean, 1 violations or
failed tests, 2 bad input, usage or `unknown`, 3 an internal error (a bug: please report).
"""


def _sub_action(p: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return a
    return None


def _flag(a: argparse.Action) -> str:
    """An option as a user types it: ``-o, --output FILE`` or a positional's metavar."""
    if not a.option_strings:
        return f"`{a.metavar or a.dest}`"
    meta = ""
    if a.nargs != 0:
        m = a.metavar if a.metavar is not None else a.dest.upper()
        meta = " " + (" ".join(m) if isinstance(m, tuple) else str(m))
    return ", ".join(f"`{o}{meta}`" for o in a.option_strings)


def _help(a: argparse.Action) -> str:
    text = (a.help or "").replace("%(default)s", str(a.default)).replace("%%", "%")
    text = " ".join(text.split()).replace("|", "\\|")
    if a.choices and not isinstance(a, argparse._SubParsersAction):
        text += (" " if text else "") + "(one of: " + ", ".join(
            f"`{c}`" for c in a.choices) + ")"
    return text


def _usage(p: argparse.ArgumentParser) -> str:
    fmt = argparse.HelpFormatter(p.prog, width=10_000)  # one line, not the terminal's width
    fmt.add_usage(p.usage, p._actions, p._mutually_exclusive_groups, prefix="")
    return " ".join(fmt.format_help().split())


def _verb(name: str, p: argparse.ArgumentParser, summary: str, depth: int) -> list[str]:
    out = [f"{'#' * depth} `cellspec {name}`", ""]
    if summary:
        out += [summary[0].upper() + summary[1:] + ".", ""]
    out += ["```", _usage(p), "```", ""]
    if p.description and p.description != summary:
        out += [" ".join(p.description.split()), ""]
    rows = [a for a in p._actions if a.help != argparse.SUPPRESS
            and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    if rows:
        out += ["| argument | meaning |", "|---|---|"]
        out += [f"| {_flag(a)} | {_help(a)} |" for a in rows]
        out.append("")
    sub = _sub_action(p)
    if sub is not None:
        helps = {c.dest: c.help or "" for c in sub._choices_actions}
        for sname, sp in sub.choices.items():
            out += _verb(f"{name} {sname}", sp, helps.get(sname, ""), depth + 1)
    return out


def render() -> str:
    """The whole page (deterministic: the parser's order, no terminal width)."""
    root = build_parser()
    sub = _sub_action(root)
    assert sub is not None
    helps = {c.dest: c.help or "" for c in sub._choices_actions}
    lines = [HEADER, "| verb | what it does |", "|---|---|"]
    lines += [f"| [`{n}`](#cellspec-{n}) | {helps.get(n, '')} |" for n in sub.choices]
    lines += ["", "Global options: `--version`, `-v`/`--verbose` (show the traceback of an "
              "internal error, as `CELLSPEC_DEBUG=1`).", ""]
    for name, p in sub.choices.items():
        lines += _verb(name, p, helps.get(name, ""), 2)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    """Rewrite docs/cli.md (``--check``: compare only; exit 1 when stale)."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/cli.md is stale")
    a = ap.parse_args(argv)
    text = render()
    if a.check:
        if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != text:
            print("docs/cli.md is stale: run python docs/gen_cli.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

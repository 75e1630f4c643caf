"""The longest functions in the package: line span of every ``def`` (decorators excluded).

Walks ``cellspec/`` with :mod:`ast` and measures each function's span from its ``def``
line to its last line (``end_lineno - lineno + 1``, nested functions counted inside their
parent and on their own). A size check, not a speed benchmark: it tracks the
"no function over ~100 lines" rule.

Output: ONE JSON line on stdout (the ``--top`` longest, and how many exceed ``--over``);
a short table on stderr.

    python bench/longest_functions.py [--top 10] [--over 100]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def spans(package: Path) -> list[tuple[int, str]]:
    """(lines, "module.py:qualname") of every function under ``package``, longest first."""
    out: list[tuple[int, str]] = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        rel = path.relative_to(package.parent).as_posix()

        def walk(node: ast.AST, prefix: str, rel: str = rel) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    name = f"{prefix}{child.name}"
                    out.append((child.end_lineno - child.lineno + 1,  # type: ignore[operator]
                                f"{rel}:{name}"))
                    walk(child, f"{name}.")
                elif isinstance(child, ast.ClassDef):
                    walk(child, f"{prefix}{child.name}.")
                else:
                    walk(child, prefix)

        walk(tree, "")
    out.sort(key=lambda t: (-t[0], t[1]))
    return out


def main() -> int:
    """Print the JSON line and the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--over", type=int, default=100)
    args = ap.parse_args()
    found = spans(ROOT / "cellspec")
    top = found[:args.top]
    print(json.dumps({"bench": "longest_functions", "functions": len(found),
                      "over": args.over, "n_over": sum(n > args.over for n, _ in found),
                      "top": [{"lines": n, "function": f} for n, f in top]}))
    for n, f in top:
        print(f"{n:5d}  {f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Every third-party module that cellspec or its tests import is installed by what
pyproject.toml declares (the core and the extras, with their own requirements): an import
of an undeclared package fails here, not only in .ci/run's fresh virtual environment."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata

from conftest import REPO

# imported only inside `try: ... except ImportError` as an optional speed-up, with a
# fallback that gives the same answers (tests/test_stability.py compares the two paths)
OPTIONAL = {"scipy"}


def _name(req: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _declared() -> set[str]:
    """The distributions the project declares, with their requirements (transitively; a
    requirement's extras, e.g. dask[distributed], bring theirs)."""
    proj = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    todo = [*proj["dependencies"], *(r for reqs in proj["optional-dependencies"].values()
                                     for r in reqs)]
    seen: set[str] = set()
    while todo:
        req = todo.pop()
        name = _name(req)
        extras = re.search(r"\[([^\]]*)\]", req.split(";")[0])
        wanted = {e.strip() for e in extras.group(1).split(",")} if extras else set()
        key = name + "[" + ",".join(sorted(wanted)) + "]"
        if key in seen or name == "cellspec":
            continue
        seen |= {key, name}
        try:
            reqs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for r in reqs:
            m = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", r)
            if m is None or m.group(1) in wanted:
                todo.append(r)
    return seen


def _imports() -> dict[str, str]:
    """Top-level module -> the first file importing it, over cellspec/, tests/, bench/."""
    local = {p.stem for p in (REPO / "tests").glob("*.py")} | {
        p.stem for p in (REPO / "bench").glob("*.py")} | {
        p.stem for p in (REPO / "tests" / "data").rglob("*.py")} | {"cellspec", "tests", "bench"}
    out: dict[str, str] = {}
    files = [*sorted((REPO / "cellspec").rglob("*.py")), *sorted((REPO / "tests").glob("*.py"))]
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods = [node.module]
            else:
                continue
            for m in mods:
                top = m.split(".")[0]
                if top not in sys.stdlib_module_names and top not in local:
                    out.setdefault(top, str(f.relative_to(REPO)))
    return out


def test_every_imported_package_is_declared():
    declared = _declared()
    owners = metadata.packages_distributions()
    missing = []
    for mod, where in sorted(_imports().items()):
        if mod in OPTIONAL:
            continue
        dists = {d.lower().replace("_", "-") for d in owners.get(mod, [])}
        if not dists & declared:
            missing.append(f"{mod} (imported by {where}; installed by {sorted(dists) or 'none'})")
    assert not missing, missing

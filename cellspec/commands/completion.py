"""cellspec completion: print a shell completion script (shtab) for bash, zsh or fish."""

from __future__ import annotations

import argparse
import sys

from cellspec.commands.common import EXIT_OK, add_shared
from cellspec.core.errors import CellspecError

SHELLS = ("bash", "zsh", "fish")
INSTALL = {
    "bash": "cellspec completion bash > ~/.local/share/bash-completion/completions/cellspec",
    "zsh": 'cellspec completion zsh > "${fpath[1]}/_cellspec"  (then: compinit)',
    "fish": "cellspec completion fish > ~/.config/fish/completions/cellspec.fish",
}
_FILE_DESTS = {"cell", "layout", "paths", "files", "db", "trace", "spec", "plan", "output",
               "script", "trajectories", "junit_xml", "witness", "cassette", "record", "gantt"}
_DIR_DESTS = {"snapshots", "plot"}


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``completion`` verb."""
    c = sub.add_parser("completion", help="print a shell completion script",
                       description="Print the completion script of a shell on stdout. Install: "
                       + "; ".join(f"{s}: {cmd}" for s, cmd in INSTALL.items()) + ".")
    add_shared(c, fmt=None)
    c.add_argument("shell", choices=SHELLS, help="the shell to complete for")
    c.set_defaults(func=run)


def _annotate(parser: argparse.ArgumentParser) -> None:
    """Complete file arguments with file names and folder arguments with folders."""
    # lazy: CLI start-up time (only `completion` needs shtab)
    import shtab

    for act in parser._actions:
        if isinstance(act, argparse._SubParsersAction):
            for sp in act.choices.values():
                _annotate(sp)
        elif act.dest in _DIR_DESTS:
            act.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
        elif act.dest in _FILE_DESTS and not act.choices:
            act.complete = shtab.FILE  # type: ignore[attr-defined]


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    try:
        # lazy: CLI start-up time (only `completion` needs shtab)
        import shtab
    except ImportError:
        raise CellspecError("cellspec completion needs shtab: pip install shtab") from None
    root = a._root
    _annotate(root)
    sys.stdout.write(shtab.complete(root, shell=a.shell))
    return EXIT_OK

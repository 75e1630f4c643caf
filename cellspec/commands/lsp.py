"""cellspec lsp: the language server for .cell files (stdio), for any LSP editor."""

from __future__ import annotations

import argparse

from cellspec.commands.common import EXIT_OK, add_shared
from cellspec.core.errors import CellspecError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``lsp`` verb."""
    p = sub.add_parser("lsp", help="run the language server for .cell files (stdio)",
                       description="Speak the Language Server Protocol on stdin/stdout: "
                       "diagnostics (the CLI's messages), hover, go to definition, symbols, "
                       "completion, formatting and a 'run this test' code lens. Needs the "
                       "[lsp] extra (pygls, lsprotocol).")
    add_shared(p, fmt=None)
    p.add_argument("--stdio", action="store_true",
                   help="talk over stdin/stdout (the default and only transport; accepted "
                   "because editors pass it)")
    p.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code when the client says exit."""
    try:
        # lazy: the lsp extra (pygls); its absence is reported here
        from cellspec.lsp.server import serve
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("pygls", "lsprotocol", "cattrs"):
            raise
        raise CellspecError(f"cellspec lsp needs pygls and lsprotocol: "
                            f"pip install 'cellspec[lsp]' ({exc})") from None
    serve()
    return EXIT_OK

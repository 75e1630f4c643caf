"""Waiting for an LSP server's diagnostics in the pytest-lsp tests (test_lsp, test_diff_lsp):
publications can race the test, so it polls the notifications until a condition holds."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from lsprotocol import types as T


async def until(client, cond: Callable[[], object], timeout: float = 60.0) -> None:  # noqa: ANN001
    """Wait for diagnostics until ``cond()`` holds, at most ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError(f"timed out; diagnostics: {client.diagnostics}")
        try:
            await asyncio.wait_for(
                client.wait_for_notification(T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS), 0.5)
        except TimeoutError:
            pass

"""clingo's messages (warnings such as an undefined atom) routed to Python logging, at
DEBUG on the ``cellspec.clingo`` logger: nothing reaches a user's terminal unless logging
is configured (``logging.basicConfig(level=logging.DEBUG)``), and nothing is lost."""

from __future__ import annotations

import logging
from typing import Any

LOG = logging.getLogger("cellspec.clingo")


def clingo_logger(code: Any, message: str) -> None:
    """The ``logger`` of every ``clingo.Control``: one DEBUG record per message."""
    LOG.debug("clingo %s: %s", getattr(code, "name", code), message.strip())

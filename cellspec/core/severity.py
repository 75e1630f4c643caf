"""A rule's severity (``rule NAME "msg" [severity X]``): a string enum, so JSON and text
outputs keep the exact words the language uses."""

from __future__ import annotations

from enum import StrEnum


class Severity(StrEnum):
    """How a violated rule counts: ``error`` fails the verdict, ``warning`` is reported and
    never fails it, ``preference`` is a weighted wish, scored and never failing."""

    ERROR = "error"  # the default
    WARNING = "warning"
    PREFERENCE = "preference"


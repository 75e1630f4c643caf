"""Limits every verb honours, and the one validator of each (time limits, counts, memory
budgets, output paths): checked up front, bad input (exit 2) when out of range."""

from __future__ import annotations

import re

from cellspec.core.errors import CellspecError
from cellspec.core.io import check_writable

MAX_SECONDS = 86_400.0  # a time limit beyond a day is a typo (and overflows solver timers)
MAX_COUNT = 1_000_000_000  # a count limit (calls, tokens, bytes in N) beyond this is a typo
DEFAULT_MAX_MEMORY = 2 * 1024**3  # bytes: --max-memory when not given (2 GiB)
MIN_MEMORY, MAX_MEMORY = 64 * 1024**2, 1024**4  # 64 MiB .. 1 TiB
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1024**2, "mb": 1000**2,
               "mib": 1024**2, "g": 1024**3, "gb": 1000**3, "gib": 1024**3, "t": 1024**4,
               "tb": 1000**4, "tib": 1024**4}


def check_count(value: int | None, flag: str, least: int = 1, most: int = MAX_COUNT) -> None:
    """Bad input unless the count limit ``value`` (workers, calls, tokens, bytes) is a whole
    number from ``least`` to ``most`` (None: not given, nothing to check)."""
    if value is not None and not (least <= value <= most):
        raise CellspecError(f"{flag} must be a whole number from {least} to {most}")


def parse_memory(text: str | int | None, flag: str = "--max-memory") -> int:
    """Bytes of a memory budget: bytes, or a number with a unit (``512M``, ``2G``, ``1.5GiB``;
    K/M/G/T are powers of 1024, KB/MB/GB/TB of 1000), from 64 MiB to 1 TiB; None is the
    default budget (:data:`DEFAULT_MAX_MEMORY`)."""
    if text is None:
        return DEFAULT_MAX_MEMORY
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _SIZE_UNITS:
        raise CellspecError(f"{flag}: expected a size such as 512M or 2G, got {text!r}")
    v = int(float(m.group(1)) * _SIZE_UNITS[unit])
    if not (MIN_MEMORY <= v <= MAX_MEMORY):
        raise CellspecError(f"{flag} must be from 64M to 1T, got {text}")
    return v


def check_seconds(value: float, flag: str = "--time-limit", most: float | None = None) -> None:
    """The one validator of every time-limit flag of every verb: bad input unless ``value``
    is a finite, positive number of seconds (NaN, infinity, 0 and negatives are not), at most
    ``most`` (default :data:`MAX_SECONDS`, a day)."""
    most = MAX_SECONDS if most is None else most
    if not (value > 0) or not (value <= most):
        limit = f", at most {most:g}" if most is not None else ""
        raise CellspecError(f"{flag} must be a positive number of seconds{limit}")


def check_output(path: str | None, flag: str = "-o") -> None:
    """Bad input unless the file ``path`` can be written (see
    :func:`cellspec.core.io.check_writable`): checked before the work."""
    check_writable(path, flag)


MAX_LLM_TIMEOUT = 600.0  # seconds per LLM call
MAX_LLM_RETRIES = 10  # retries per LLM call


def check_llm_limits(timeout: float, max_retries: int, temperature: float | None,
                     flags: tuple[str, str, str] = ("the LLM timeout", "max_retries",
                                                    "the temperature")) -> None:
    """The one validator of an LLM client's limits (every adapter and ``design``'s flags):
    a per-call ``timeout`` of at most :data:`MAX_LLM_TIMEOUT` s, 0 to
    :data:`MAX_LLM_RETRIES` retries, a sampling ``temperature`` from 0 to 2 (None: the
    server's default); ``flags`` name the three in the message (e.g. the CLI's options)."""
    check_seconds(timeout, flags[0], MAX_LLM_TIMEOUT)
    if not (0 <= max_retries <= MAX_LLM_RETRIES):
        raise CellspecError(f"{flags[1]} must be from 0 to {MAX_LLM_RETRIES}")
    if temperature is not None and not (0 <= temperature <= 2):
        raise CellspecError(f"{flags[2]} must be a number from 0 to 2")

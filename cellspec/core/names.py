"""'Did you mean' for unknown names: the known name closest to a misspelt one (rapidfuzz),
so every "unknown X" diagnostic can say what was probably meant."""

from __future__ import annotations

from collections.abc import Iterable


def closest(name: str, known: Iterable[str], cutoff: float = 60.0) -> str | None:
    """The known name most like ``name`` (normalised Indel similarity >= ``cutoff`` %,
    ties: the first in ``known``'s order), or None."""
    choices = [k for k in dict.fromkeys(known) if k != name]
    if not choices or not name:
        return None
    # lazy: rapidfuzz loads only when a name is unknown (an error path)
    from rapidfuzz import fuzz, process

    best = process.extractOne(name, choices, scorer=fuzz.ratio, score_cutoff=cutoff,
                              processor=str.lower)
    return None if best is None else str(best[0])


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'keepout'?"`` for the closest known name, or an empty string."""
    best = closest(name, known)
    return f"; did you mean '{best}'?" if best else ""


def unknown(what: str, name: str, known: Iterable[str], label: str = "known") -> str:
    """``unknown rule 'keepuot'; did you mean 'keepout'? (known: a, b, ...)``."""
    names = list(dict.fromkeys(known))
    listed = ", ".join(names) if names else "none"
    return f"unknown {what} '{name}'{did_you_mean(name, names)} ({label}: {listed})"

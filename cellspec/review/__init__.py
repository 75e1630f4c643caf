"""Human review of a layout in the browser: a server-side session (edits, re-verification,
repair with undo, accept/reject) and a viser page that shows and edits it.

``ReviewSession`` (``cellspec.review.session``) holds all state and needs no browser;
``ReviewApp`` (``cellspec.review.app``) serves it with viser.
"""

from cellspec.review.session import EditResult, RepairOutcome, ReviewSession

__all__ = ["EditResult", "RepairOutcome", "ReviewSession"]

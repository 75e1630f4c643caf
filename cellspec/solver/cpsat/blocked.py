"""Blocked regions for repair and generation: extra keep-out zones reported by the twin
or typed by a user (``--block``), parsed by the cell grammar itself."""

from __future__ import annotations

from cellspec.core.errors import CellspecError
from cellspec.dsl.model import Cell, Zone


def with_blocked(cell: Cell, blocked: tuple[Zone, ...] | list[Zone]) -> Cell:
    """The cell with extra keep-out zones (blocked regions reported by the twin or typed
    by a user); names must be new."""
    if not blocked:
        return cell
    have = {z.name for z in cell.keepouts}
    for z in blocked:
        if z.name in have or z.name == "workspace":
            raise CellspecError(f"blocked region '{z.name}': the cell already has a zone of "
                                "that name")
        have.add(z.name)
    return cell.model_copy(update={"keepouts": tuple(cell.keepouts) + tuple(blocked)})


def parse_blocked(spec: str, name: str) -> Zone:
    """A blocked region written like a keep-out zone, in metres: ``box x [a, b] y [c, d]``
    (omitted axes unbounded) or a half-space such as ``x + y > 0.7``; parsed by the cell
    grammar itself. Raises CellspecError naming the region."""
    from cellspec.core.errors import Diagnostic
    from cellspec.dsl.model import Source
    from cellspec.dsl.parser import load_cell_text

    body = spec.strip()
    if not body.startswith("box") and not body.startswith(":"):
        body = ": " + body
    text = ("cell blocked {\n    units m\n    workspace x [-1000, 1000] y [-1000, 1000] "
            f"z [-1000, 1000]\n    keepout {name} {body}\n}}\n")
    try:
        c = load_cell_text(text, "--block")
    except CellspecError as exc:
        msgs = "; ".join(dd.message for dd in exc.diagnostics)
        raise CellspecError(Diagnostic("--block", 0, 0, f"blocked region {spec!r}: "
                                       f"{msgs}")) from None
    # the parser bounds omitted axes within clingo's integers already
    return c.keepouts[0].model_copy(update={"source": Source(file="--block", line=0, col=0)})

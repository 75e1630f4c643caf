"""Layout files (JSON): parsing, validation against hostile input, and resolution
against a cell (default sizes, grippers, order).

A bad layout never yields a traceback: every problem becomes a diagnostic naming
the file and, where there is one, the line and column or the JSON path.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from cellspec.core.errors import CellspecError, Diagnostic, line_col
from cellspec.core.geometry import MAX_ABS_COORD_M, MAX_SIZE_M
from cellspec.core.io import TooLarge, read_bounded
from cellspec.core.stdio import STDIN_NAME, is_stdin, read_stdin_text

if TYPE_CHECKING:
    from cellspec.dsl.model import Cell

MAX_LAYOUT_BYTES = 32 * 1024 * 1024
MAX_PARTS = 1_000_000
MAX_ABS_YAW_DEG = 3600.0  # ten turns: anything larger is a unit mistake, not an angle
ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.\-]{0,127}$"

Finite = Annotated[float, Field(allow_inf_nan=False, strict=True)]


class PartIn(BaseModel):
    """One part as written in a layout file."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: Annotated[StrictStr, Field(pattern=ID_PATTERN)]
    type: StrictStr
    pos: tuple[Finite, Finite, Finite]
    size: tuple[Finite, Finite, Finite] | None = None
    gripper: Literal["vacuum", "parallel"] | None = None
    yaw: Finite | None = None  # degrees about the vertical axis (docs/shapes.md)


class LayoutIn(BaseModel):
    """A layout file: parts (AABB centres), optional units and placement order."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    units: Literal["m", "mm"] = "m"
    parts: list[PartIn]
    order: list[StrictStr] | None = None


@dataclass(frozen=True)
class Layout:
    """A validated layout in metres; ``size`` rows are NaN where the cell's type size applies."""

    ids: tuple[str, ...]
    types: tuple[str, ...]
    pos: np.ndarray
    size: np.ndarray
    grippers: tuple[str | None, ...]
    order: tuple[str, ...] | None
    path: str = "<layout>"
    yaw: np.ndarray | None = None  # (n,) degrees about z as written; None: all 0

    def __post_init__(self) -> None:
        n = len(self.ids)
        if self.yaw is None:
            object.__setattr__(self, "yaw", np.zeros(n, dtype=np.float64))
        assert self.yaw is not None and self.yaw.shape == (n,)
        self.yaw.setflags(write=False)
        assert self.pos.shape == (n, 3) and self.size.shape == (n, 3)
        assert len(self.types) == n and len(self.grippers) == n
        assert len(set(self.ids)) == n, "part ids must be unique"
        self.pos.setflags(write=False)
        self.size.setflags(write=False)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def yawed(self) -> bool:
        """Some part has a non-zero yaw (the layout is not written axis-aligned)."""
        return bool(np.any(self.yaw != 0))

    def yaw_of(self, i: int) -> float:
        """Part ``i``'s yaw in degrees (0 when none was written)."""
        return float(self.yaw[i]) if self.yaw is not None else 0.0

    def with_order(self, order: tuple[str, ...] | list[str] | None) -> Layout:
        """The same layout with another placement order (None: no order)."""
        return dataclasses.replace(self, order=None if order is None else tuple(order))

    def resolve(self, cell: Cell) -> np.ndarray:
        """Each part's box size in metres, (n, 3), a new array: the part's own ``size``,
        else its type's size in ``cell`` (the one place a layout's default sizes are
        filled in: the solver's instance, the twin, the world model, review, the agent).

        Raises :class:`UnknownPartType` (a CellspecError naming the first such part) when
        a part has no size of its own and the cell does not define its type."""
        size = np.array(self.size, dtype=np.float64, copy=True).reshape(len(self), 3)
        missing = np.isnan(size).any(axis=1)
        if not missing.any():
            return size
        types = np.array(self.types, dtype=object)
        for t in sorted({self.types[i] for i in np.flatnonzero(missing)}):
            pt = cell.part_types.get(t)
            if pt is not None:
                size[missing & (types == t)] = [float(v) for v in pt.size]
        left = np.flatnonzero(np.isnan(size).any(axis=1))
        if left.size:
            raise UnknownPartType(self, int(left[0]), cell)
        return size

    def to_json(self) -> dict[str, Any]:
        """The layout as the DESIGN.md JSON object (metres)."""
        parts = []
        for i, pid in enumerate(self.ids):
            d: dict[str, Any] = {"id": pid, "type": self.types[i],
                                 "pos": [float(v) for v in self.pos[i]]}
            if not np.isnan(self.size[i]).any():
                d["size"] = [float(v) for v in self.size[i]]
            if self.grippers[i]:
                d["gripper"] = self.grippers[i]
            if self.yaw is not None and self.yaw[i] != 0:
                d["yaw"] = float(self.yaw[i])
            parts.append(d)
        out: dict[str, Any] = {"units": "m", "parts": parts}
        if self.order is not None:
            out["order"] = list(self.order)
        return out


class UnknownPartType(CellspecError):
    """A part with no size of its own whose type the cell does not define (from
    :meth:`Layout.resolve`): ``row``, ``part`` and ``type`` name the first such part."""

    def __init__(self, layout: Layout, row: int, cell: Cell) -> None:
        self.row, self.part, self.type = row, layout.ids[row], layout.types[row]
        known = ", ".join(sorted(cell.part_types)) or "none"
        super().__init__(Diagnostic(layout.path, 0, 0, f"parts[{row}].type: unknown part "
                                    f"type '{self.type}' (the cell defines: {known})"))


def _fail(path: str, msg: str, line: int = 0, col: int = 0) -> CellspecError:
    return CellspecError(Diagnostic(path, line, col, msg))


def _json_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for k in loc:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out or "(top level)"


class _NotANumber(ValueError):
    pass


_NAN_RE = re.compile(r"(?<![\w\"])-?(NaN|Infinity)(?![\w\"])")


def _reject_constant(name: str) -> float:
    raise _NotANumber(f"{name} is not a number")


def layout_from_obj(obj: Any, path: str = "<layout>") -> Layout:
    """Validate a decoded JSON object and build a Layout (metres)."""
    if not isinstance(obj, dict):
        raise _fail(path, "a layout must be a JSON object with a \"parts\" list")
    parts = obj.get("parts")
    if isinstance(parts, list) and len(parts) > MAX_PARTS:
        raise _fail(path, f"{len(parts)} parts; the limit is {MAX_PARTS}")
    try:
        lay = LayoutIn.model_validate(obj)
    except ValidationError as exc:
        errs: list[Diagnostic] = []
        for e in exc.errors()[:20]:
            where = _json_path(tuple(e["loc"]))
            msg = e["msg"]
            if e["type"] == "finite_number":
                msg = "must be a finite number (NaN and infinity are not positions)"
            elif e["type"] == "extra_forbidden":
                msg = "unknown field"
            elif e["type"] == "string_pattern_mismatch":
                msg = ("part ids are 1-128 characters: a letter or _ then letters, digits, "
                       "_ . -")
            errs.append(Diagnostic(path, 0, 0, f"{where}: {msg}"))
        raise CellspecError(errs) from None
    scale = 0.001 if lay.units == "mm" else 1.0
    n = len(lay.parts)
    ids = tuple(p.id for p in lay.parts)
    seen: dict[str, int] = {}
    diags = []
    for i, pid in enumerate(ids):
        if pid in seen:
            diags.append(Diagnostic(path, 0, 0, f"parts[{i}].id: duplicate id '{pid}' "
                                    f"(first at parts[{seen[pid]}])"))
        else:
            seen[pid] = i
    pos = np.array([p.pos for p in lay.parts], dtype=np.float64).reshape(n, 3) * scale
    size = np.array([p.size if p.size is not None else (math.nan,) * 3 for p in lay.parts],
                    dtype=np.float64).reshape(n, 3) * scale
    bad = np.argwhere(np.abs(pos) > MAX_ABS_COORD_M)
    for i, k in bad[:10]:
        diags.append(Diagnostic(path, 0, 0, f"parts[{i}].pos[{k}]: {pos[i, k]:.6g} m is absurd "
                                f"(|coordinate| must be at most {MAX_ABS_COORD_M:g} m)"))
    with np.errstate(invalid="ignore"):
        badsz = np.argwhere((size <= 0) | (size > MAX_SIZE_M))
    for i, k in badsz[:10]:
        diags.append(Diagnostic(path, 0, 0, f"parts[{i}].size[{k}]: {size[i, k]:.6g} m; sizes "
                                f"must be positive and at most {MAX_SIZE_M:g} m"))
    yaw = np.array([p.yaw if p.yaw is not None else 0.0 for p in lay.parts],
                   dtype=np.float64).reshape(n)
    for i in np.flatnonzero(np.abs(yaw) > MAX_ABS_YAW_DEG)[:10]:
        diags.append(Diagnostic(path, 0, 0, f"parts[{i}].yaw: {yaw[i]:.6g} degrees is absurd "
                                f"(|yaw| must be at most {MAX_ABS_YAW_DEG:g})"))
    order = None
    if lay.order is not None:
        order = tuple(lay.order)
        oseen: set[str] = set()
        for k, pid in enumerate(order):
            if pid not in seen:
                diags.append(Diagnostic(path, 0, 0, f"order[{k}]: unknown part '{pid}'"))
            elif pid in oseen:
                diags.append(Diagnostic(path, 0, 0, f"order[{k}]: '{pid}' is listed twice"))
            oseen.add(pid)
        missing = [pid for pid in ids if pid not in oseen]
        if missing:
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            diags.append(Diagnostic(path, 0, 0, "order: must list every part once; missing "
                                    f"{', '.join(missing[:5])}{more}"))
    if diags:
        raise CellspecError(diags[:50])
    return Layout(ids=ids, types=tuple(p.type for p in lay.parts), pos=pos, size=size,
                  grippers=tuple(p.gripper for p in lay.parts), order=order, path=path,
                  yaw=yaw)


def load_layout(path: str | os.PathLike[str], max_bytes: int = MAX_LAYOUT_BYTES,
                flag: str | None = None) -> Layout:
    """Read and validate a layout JSON file (``-``: standard input); raise CellspecError
    (exit 2) on any problem. ``flag``: the caller's option that raises ``max_bytes``
    (named in the message about a file that is too large; only verbs that have one)."""
    if is_stdin(path):
        return layout_from_text(read_stdin_text(max_bytes, "the layout"), STDIN_NAME)
    shown = str(path)
    try:
        raw = read_bounded(path, max_bytes)
    except IsADirectoryError:
        raise _fail(shown, "is a directory, expected a layout .json file") from None
    except TooLarge as exc:
        hint = f"raise it with {flag}" if flag else "the limit of a layout file"
        raise _fail(shown, f"layout file is {exc} ({hint})") from None
    except OSError as exc:
        raise _fail(shown, f"cannot read layout: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(shown, f"not UTF-8 text (byte {exc.start})") from None
    return layout_from_text(text, shown)


def layout_from_text(text: str, shown: str) -> Layout:
    """Validate a layout's JSON text (``shown`` names it in diagnostics)."""
    if not text.strip():
        raise _fail(shown, "empty layout file: expected a JSON object with \"parts\"", 1, 1)
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise _fail(shown, f"invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except _NotANumber as exc:
        m = _NAN_RE.search(text)
        line, col = line_col(text, m.start()) if m else (0, 0)
        raise _fail(shown, f"invalid JSON: {exc} (NaN and Infinity are not allowed)", line,
                    col) from None
    except ValueError as exc:
        raise _fail(shown, f"invalid JSON: {exc}") from None
    except RecursionError:
        raise _fail(shown, "invalid JSON: nested too deeply") from None
    return layout_from_obj(obj, shown)

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
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeGuard

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
MAX_ERRORS = 50  # errors listed per layout; the rest are counted
MAX_ABS_YAW_DEG = 3600.0  # ten turns: anything larger is a unit mistake, not an angle
ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.\-]{0,127}$"

Finite = Annotated[float, Field(allow_inf_nan=False, strict=True)]


class PartEntry(BaseModel):
    """One part as written in a layout file."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: Annotated[StrictStr, Field(pattern=ID_PATTERN)]
    type: StrictStr
    pos: tuple[Finite, Finite, Finite]
    size: tuple[Finite, Finite, Finite] | None = None
    gripper: Literal["vacuum", "parallel"] | None = None
    yaw: Finite | None = None  # degrees about the vertical axis (docs/shapes.md)


class LayoutDocument(BaseModel):
    """A layout file: parts (AABB centres), optional units and placement order."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    format: Literal["cellspec.layout/1"] | None = None  # optional: docs/formats.md
    units: Literal["m", "mm"] = "m"
    parts: list[PartEntry]
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
        """The layout as the layout JSON object (metres; docs/formats.md)."""
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


class _Const:
    """A NaN or Infinity literal of the JSON text, kept (not raised) so that every other
    error is found too; ``line``, ``col`` locate it when known."""

    def __init__(self, name: str, line: int = 0, col: int = 0) -> None:
        self.name, self.line, self.col = name, line, col


_NAN_RE = re.compile(r"(?<![\w\"])-?(NaN|Infinity)(?![\w\"])")


def _number(v: Any) -> TypeGuard[float]:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _triple(v: Any) -> TypeGuard[list[float]]:
    return isinstance(v, list | tuple) and len(v) == 3 and all(_number(x) for x in v)


def _schema_diags(exc: ValidationError, path: str) -> list[Diagnostic]:
    """The pydantic errors as diagnostics, each at its JSON path."""
    errs: list[Diagnostic] = []
    for e in exc.errors():
        where = _json_path(tuple(e["loc"]))
        msg, line, col = e["msg"], 0, 0
        if isinstance(e.get("input"), _Const):
            c = e["input"]
            msg, line, col = (f"invalid JSON: {c.name} is not a number (NaN and Infinity are "
                              "not allowed)", c.line, c.col)
        elif e["type"] == "finite_number":
            msg = "must be a finite number (NaN and infinity are not positions)"
        elif e["type"] == "extra_forbidden":
            msg = "unknown field"
        elif e["type"] == "string_pattern_mismatch":
            msg = ("part ids are 1-128 characters: a letter or _ then letters, digits, "
                   "_ . -")
        errs.append(Diagnostic(path, line, col, f"{where}: {msg}"))
    return errs


def _value_diags(obj: dict, path: str, part_types: Collection[str] | None
                 ) -> list[Diagnostic]:
    """What the schema does not say, read from the raw object wherever it is readable (so
    a part with a bad field does not hide another part's duplicate id): duplicate ids,
    absurd coordinates, sizes and yaws, unknown part types and order entries."""
    raw = obj.get("parts")
    parts = [p if isinstance(p, dict) else {} for p in raw] if isinstance(raw, list) else []
    scale = 0.001 if obj.get("units") == "mm" else 1.0
    diags: list[Diagnostic] = []
    seen: dict[str, int] = {}
    for i, p in enumerate(parts):
        pid = p.get("id")
        if isinstance(pid, str):
            if pid in seen:
                diags.append(Diagnostic(path, 0, 0, f"parts[{i}].id: duplicate id '{pid}' "
                                        f"(first at parts[{seen[pid]}])"))
            else:
                seen[pid] = i
        pos = p.get("pos")
        if _triple(pos):
            for k, v in enumerate(pos):
                if abs(v * scale) > MAX_ABS_COORD_M:
                    diags.append(Diagnostic(path, 0, 0, f"parts[{i}].pos[{k}]: {v * scale:.6g}"
                                            f" m is absurd (|coordinate| must be at most "
                                            f"{MAX_ABS_COORD_M:g} m)"))
        size = p.get("size")
        if _triple(size):
            for k, v in enumerate(size):
                if not 0 < v * scale <= MAX_SIZE_M:
                    diags.append(Diagnostic(path, 0, 0, f"parts[{i}].size[{k}]: "
                                            f"{v * scale:.6g} m; sizes must be positive and "
                                            f"at most {MAX_SIZE_M:g} m"))
        yaw = p.get("yaw")
        if _number(yaw) and abs(yaw) > MAX_ABS_YAW_DEG:
            diags.append(Diagnostic(path, 0, 0, f"parts[{i}].yaw: {yaw:.6g} degrees is absurd "
                                    f"(|yaw| must be at most {MAX_ABS_YAW_DEG:g})"))
    if part_types is not None:
        unknown: dict[str, list[int]] = {}
        for i, p in enumerate(parts):
            t = p.get("type")
            if isinstance(t, str) and t not in part_types:
                unknown.setdefault(t, []).append(i)
        known = ", ".join(sorted(part_types)) or "none"
        for t, rows in sorted(unknown.items(), key=lambda kv: kv[1][0]):
            diags.append(Diagnostic(path, 0, 0, f"parts[{rows[0]}].type: unknown part type "
                                    f"'{t}' (the cell defines: {known}); {len(rows)} part(s) "
                                    "use it"))
    order = obj.get("order")
    if isinstance(order, list) and all(isinstance(x, str) for x in order):
        oseen: set[str] = set()
        for k, pid in enumerate(order):
            if pid not in seen:
                diags.append(Diagnostic(path, 0, 0, f"order[{k}]: unknown part '{pid}'"))
            elif pid in oseen:
                diags.append(Diagnostic(path, 0, 0, f"order[{k}]: '{pid}' is listed twice"))
            oseen.add(pid)
        missing = [pid for pid in seen if pid not in oseen]
        if missing:
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            diags.append(Diagnostic(path, 0, 0, "order: must list every part once; missing "
                                    f"{', '.join(missing[:5])}{more}"))
    return diags


def _part_row(d: Diagnostic) -> tuple[int, int]:
    """A diagnostic's place in the file: (0, i) for parts[i], then order, then the rest."""
    m = re.match(r"parts\[(\d+)\]", d.message)
    if m:
        return (0, int(m.group(1)))
    return (1, 0) if d.message.startswith("order") else (2, 0)


def layout_from_obj(obj: Any, path: str = "<layout>",
                    part_types: Collection[str] | None = None) -> Layout:
    """Validate a decoded JSON object and build a Layout (metres). Every error is reported
    (capped at :data:`MAX_ERRORS`), each at its JSON path; with ``part_types`` (the cell's)
    a part of another type is one of them."""
    if not isinstance(obj, dict):
        raise _fail(path, "a layout must be a JSON object with a \"parts\" list")
    parts = obj.get("parts")
    if isinstance(parts, list) and len(parts) > MAX_PARTS:
        raise _fail(path, f"{len(parts)} parts; the limit is {MAX_PARTS}")
    diags: list[Diagnostic] = []
    lay = None
    try:
        lay = LayoutDocument.model_validate(obj)
    except ValidationError as exc:
        diags.extend(_schema_diags(exc, path))
    diags.extend(_value_diags(obj, path, part_types))
    if diags or lay is None:
        diags.sort(key=_part_row)  # part by part, as the file lists them
        if len(diags) > MAX_ERRORS:
            diags = [*diags[:MAX_ERRORS],
                     Diagnostic(path, 0, 0, f"... and {len(diags) - MAX_ERRORS} more errors")]
        raise CellspecError(diags)
    scale = 0.001 if lay.units == "mm" else 1.0
    n = len(lay.parts)
    ids = tuple(p.id for p in lay.parts)
    pos = np.array([p.pos for p in lay.parts], dtype=np.float64).reshape(n, 3) * scale
    size = np.array([p.size if p.size is not None else (math.nan,) * 3 for p in lay.parts],
                    dtype=np.float64).reshape(n, 3) * scale
    yaw = np.array([p.yaw if p.yaw is not None else 0.0 for p in lay.parts],
                   dtype=np.float64).reshape(n)
    order = None if lay.order is None else tuple(lay.order)
    return Layout(ids=ids, types=tuple(p.type for p in lay.parts), pos=pos, size=size,
                  grippers=tuple(p.gripper for p in lay.parts), order=order, path=path,
                  yaw=yaw)


def load_layout(path: str | os.PathLike[str], max_bytes: int = MAX_LAYOUT_BYTES,
                part_types: Collection[str] | None = None, flag: str | None = None) -> Layout:
    """Read and validate a layout JSON file (``-``: standard input); raise CellspecError
    (exit 2) naming every problem (with ``part_types``, the cell's: unknown types too).
    ``flag``: the caller's option that raises ``max_bytes`` (named in the message about a
    file that is too large; only verbs that have one)."""
    if is_stdin(path):
        return layout_from_text(read_stdin_text(max_bytes, "the layout"), STDIN_NAME,
                                part_types)
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
    return layout_from_text(text, shown, part_types)


def layout_from_text(text: str, shown: str, part_types: Collection[str] | None = None
                     ) -> Layout:
    """Validate a layout's JSON text (``shown`` names it in diagnostics)."""
    if not text.strip():
        raise _fail(shown, "empty layout file: expected a JSON object with \"parts\"", 1, 1)
    consts: list[_Const] = []

    def constant(name: str) -> _Const:  # located below, in the order they were read
        consts.append(_Const(name))
        return consts[-1]

    try:
        obj = json.loads(text, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise _fail(shown, f"invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except ValueError as exc:
        raise _fail(shown, f"invalid JSON: {exc}") from None
    except RecursionError:
        raise _fail(shown, "invalid JSON: nested too deeply") from None
    if consts:
        found = list(_NAN_RE.finditer(text))
        if len(found) == len(consts):  # else (a literal inside a string) unlocated
            for c, m in zip(consts, found, strict=True):
                c.line, c.col = line_col(text, m.start())
        if not isinstance(obj, dict) or not isinstance(obj.get("parts"), list):
            c = consts[0]
            raise _fail(shown, f"invalid JSON: {c.name} is not a number (NaN and Infinity "
                        "are not allowed)", c.line, c.col)
    return layout_from_obj(obj, shown, part_types)

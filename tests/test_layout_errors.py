"""Issue 28 item 7: a layout names every error in one run (capped at 50), each at its JSON
path; the library's variables never collide with the names a user gives in the cell."""

from __future__ import annotations

import json
from pathlib import Path

from cellspec.cli import main

ROOT = Path(__file__).resolve().parent.parent
PANDA = ROOT / "rules" / "cells" / "panda_table.cell"
MIXED = """{"parts": [{"id": "c1", "type": "cube", "pos": ["0.5", 0, 0.025]},
           {"id": "c2", "type": "cbue", "pos": [0.6, 0, 0.025]},
           {"id": "c1", "type": "cube", "pos": [0.7, 0, 0.025]},
           {"id": "c4", "type": "cube", "pos": [0.4, 0, 0.025], "yaw": Infinity},
           {"id": "c5", "type": "cube", "pos": [0.3, 0, 0.025], "yaw": 1e999}],
 "order": ["c1", "zz"]}
"""


def _err(capsys, *args: str | Path) -> tuple[int, list[str]]:
    rc = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, [ln for ln in err.splitlines() if ": error: " in ln]


def test_every_kind_of_layout_error_in_one_run(tmp_path, capsys) -> None:
    f = tmp_path / "mixed.json"
    f.write_text(MIXED)
    rc, errs = _err(capsys, "check", PANDA, f)
    assert rc == 2
    assert errs == [
        f"{f}: error: parts[0].pos[0]: Input should be a valid number",
        f"{f}: error: parts[1].type: unknown part type 'cbue' (the cell defines: cube); 1 "
        "part(s) use it",
        f"{f}: error: parts[2].id: duplicate id 'c1' (first at parts[0])",
        f"{f}:4:72: error: parts[3].yaw: invalid JSON: Infinity is not a number (NaN and "
        "Infinity are not allowed)",
        f"{f}: error: parts[4].yaw: must be a finite number (NaN and infinity are not "
        "positions)",
        f"{f}: error: order[1]: unknown part 'zz'",
        f"{f}: error: order: must list every part once; missing c2, c4, c5",
    ]


def test_layout_errors_are_capped_at_50(tmp_path, capsys) -> None:
    parts = [{"id": "c", "type": "cube", "pos": [0.5, 0, 0.025 + 0.05 * i]} for i in range(81)]
    f = tmp_path / "dups.json"
    f.write_text(json.dumps({"parts": parts}))
    rc, errs = _err(capsys, "check", PANDA, f)
    assert rc == 2 and len(errs) == 51
    assert errs[0].endswith("parts[1].id: duplicate id 'c' (first at parts[0])")
    assert errs[-1].endswith("... and 30 more errors")


def test_a_user_name_never_collides_with_a_library_variable(tmp_path, capsys) -> None:
    # keep-outs named k and q (the standard library's variables): a9a49c7 refused the cell
    # with "variable 'k' shadows a name of the cell" at cellspec/rules/physical.cell:37:22
    text = PANDA.read_text().replace(
        "    trajectory epsilon 0.05\n",
        "    trajectory epsilon 0.05\n    keepout k box x [0.60, 0.70] y [0.15, 0.25] z [0, 0.3]\n"
        "    keepout q box x [0.30, 0.35] y [0.20, 0.25] z [0, 0.3]\n")
    cell = tmp_path / "c.cell"
    cell.write_text(text)
    lay = tmp_path / "l.json"
    lay.write_text('{"parts": [{"id": "c1", "type": "cube", "pos": [0.65, 0.2, 0.025]}]}')
    assert main(["check", str(cell), str(lay)]) == 1
    out = capsys.readouterr()
    assert "physical.cell" not in out.err
    assert "keepout(c1): c1 enters keep-out zone k by" in out.out
    # a variable of the user's own file still may not shadow the user's own zone
    cell.write_text(text + 'rule mine "{p}" : forall p: forall k in keepout: not '
                    "intersects(p, k)\n")
    rc, errs = _err(capsys, "check", cell, lay)
    line = len(text.splitlines()) + 1
    assert rc == 2 and errs == [f"{cell}:{line}:36: error: variable 'k' shadows a name of the "
                                "cell; pick another name"]

"""The CI run of bench/limits.py: the small rows end near their limit with a safe answer."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO


def test_small_limit_rows():
    r = subprocess.run([sys.executable, str(REPO / "bench" / "limits.py"), "--small",
                        "--no-peer", "--limits", "1",
                        "--rows", "check_pile,explain_pile,plan_pile,check_1mb_rules,repair,"
                        "generate_pack,sim_wall,design_pack,check_chain"],
                       capture_output=True, text=True, timeout=600, check=False)
    out = json.loads(r.stdout.splitlines()[-1])
    rows = {x["row"]: x for x in out["rows"]}
    assert set(rows) == {"check_pile", "explain_pile", "plan_pile", "check_1mb_rules", "repair",
                         "generate_pack", "sim_wall", "design_pack", "check_chain"}
    for x in rows.values():
        assert not x["wrong"] and x["memory_ok"], x
        assert x["wall"] < 1 + 6, x  # the bound plus the start of a busy CI box
    assert rows["check_pile"]["answer"] in ("fail", "unknown")  # the pile overlaps: never pass
    assert rows["explain_pile"]["answer"] in ("explained", "unknown")
    assert rows["check_1mb_rules"]["answer"] in ("refused", "unknown")
    assert rows["sim_wall"]["answer"] in ("pass", "unknown")  # the wall is buildable
    assert rows["design_pack"]["answer"] in ("generated", "accepted", "unknown")
    assert rows["check_chain"]["answer"] in ("fail", "unknown")

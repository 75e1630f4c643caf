"""Re-record the shipped real-model cassettes (tests/data/cassettes/*.jsonl) against a
model server: ``python tests/data/cassettes/record.py URL`` (e.g. the bundled server,
``../shared/llm/serve.sh start`` prints its URL). Each cassette is deleted and recorded
again with ``cellspec design|dialog --adapter openai --record``; the tests replay them
(``--adapter replay --cassette``) and need no server. Re-record when a test says a
cassette "no longer matches" (the prompt, the schema or the request changed).

Recorded with Qwen2.5-Coder-0.5B-Instruct Q4_K_M on llama-cpp-python 0.3.36 (temperature 0,
seed 0: the same server answers the same)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
MODEL = "qwen2.5-coder-0.5b"
STATION = str(ROOT / "rules" / "cells" / "dual_arm_station.cell")
MIXED = str(ROOT / "rules" / "cells" / "mixed_parts.cell")
SORT = str(ROOT / "rules" / "cells" / "sort_cubes.cell")
# cassette -> the runs recorded into it: (verb, cell, command or None, extra options)
TAPES: dict[str, list[tuple[str, str, str | None, list[str]]]] = {
    "tower3_real_model.jsonl": [
        ("design", STATION, "build a tower of three cubes at x 0.4 y 0.2",
         ["--translate", "model", "--propose", "always"])],
    "heldout_real_model.jsonl": [
        ("design", STATION, c, ["--translate", "model"]) for c in (
            "stack five cubes on top of each other",
            "a row of 4 cubes at x 0.5 y 0.3",
            "a thing that climbs in 4 steps",
            "a tower of 3 at x 0.95 y 0.2",
            "a wall 4 long and 2 high",
            "make the table look nice")] + [
        ("design", MIXED, c, ["--translate", "model"]) for c in (
            "a tower of 3 cans", "a row of 4 pucks at x 0.4 y 0.3")],
}
COMMANDS = {name: [c for _, _, c, _ in runs] for name, runs in TAPES.items()}


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    url = sys.argv[1]
    for name, runs in TAPES.items():
        tape = HERE / name
        tape.unlink(missing_ok=True)
        for verb, cell, command, extra in runs:
            argv = [sys.executable, "-m", "cellspec", verb]
            argv += [command, "--cell", cell] if verb == "design" else [cell]
            argv += ["--adapter", "openai", "--base-url", url, "--model", MODEL,
                     "--record", str(tape), "--timeout", "300", "--format", "json", *extra]
            p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
            print(f"{name}: {command}: exit {p.returncode}", file=sys.stderr)
            if p.returncode not in (0, 1):
                print(p.stderr[-2000:], file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

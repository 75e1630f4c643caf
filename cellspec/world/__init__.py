"""The persistent world model: SQLite store, data association, relations, commit and
diagnosis rules, reasoning traces and the closed loop in the simulation (issue 7)."""

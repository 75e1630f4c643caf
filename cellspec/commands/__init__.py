"""One module per command-line verb; each has ``register(subparsers)`` and ``run(args)``.

To add a verb, write its module here and add its name to ``VERBS``.
"""

VERBS = ["check", "test", "fmt", "plan", "repair", "generate", "explain", "lint", "design",
         "sim", "check_plan", "review", "run", "diagnose", "world", "settle", "dialog",
         "lsp", "completion", "batch", "diff"]

"""``python -m cellspec`` runs the command line."""

from cellspec.cli import main

raise SystemExit(main())

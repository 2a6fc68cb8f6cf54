"""``python -m probes``: see probes.cli."""

from probes.cli import main

raise SystemExit(main())

"""`python -m sensors ...` is `ppe sensor ...`."""

from sensors.cli import main

raise SystemExit(main())

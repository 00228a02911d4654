"""``python -m ppe.apps.cg``: the same as the ``ppe-cg`` command."""

from ppe.apps.cg.main import main

raise SystemExit(main())

"""``python -m ppe.apps.sor``: the same as the ``ppe-sor`` command."""

from ppe.apps.sor.main import main

raise SystemExit(main())

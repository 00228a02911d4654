from ppe.cli import main

raise SystemExit(main())

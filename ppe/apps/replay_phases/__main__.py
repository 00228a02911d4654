"""``python -m ppe.apps.replay_phases``: the same as the ``ppe-pas2p-replay`` command."""

from ppe.apps.replay_phases.main import main

raise SystemExit(main())

"""``ppe-sor``: red-black SOR over MPI ranks in horizontal strips, following PPE's schedules.

``numerics`` and ``partition`` are pure (NumPy only); ``runner`` holds the MPI part and
``planner`` the conversation with the service (through ``ppe.client``).
"""

"""Real MPI applications: ppe-sor asks PPE for schedules and reports its runs; ppe-cg is a
second one, with distinct phases, for PAS2P signatures. Shared: trace, guard, signature."""

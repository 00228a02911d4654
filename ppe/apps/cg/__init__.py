"""``ppe-cg``: conjugate gradient for the 2-D Poisson problem over MPI ranks in row strips.

A second real MPI application with distinct PAS2P phases (docs/pas2p.md): matrix-vector
products, vector updates, true-residual checks and checkpoints to disk. ``numerics`` and
``steps`` are pure; ``runner`` holds the MPI part.
"""

"""Empirical performance models built from measured runs (pure computation, no I/O).

Prophecy's curve fitting (:mod:`.prophecy`), a search over the performance-model
normal form with prediction intervals (:mod:`.search`, :mod:`.model`), models of
the run-to-run spread (:mod:`.spread`), the choice of the next runs to measure
(:mod:`.suggest`) and Prophecy's kernel coupling (:mod:`.coupling`).  See
docs/empirical.md.
"""

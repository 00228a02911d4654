"""Empirical performance models built from measured runs (pure computation, no I/O).

The runs themselves (:mod:`.runs`) and the formats people keep them in (:mod:`.formats`);
Prophecy's curve fitting (:mod:`.prophecy`), a search over the performance-model normal form
with prediction intervals (:mod:`.search`, :mod:`.model`), models of the run-to-run spread
(:mod:`.spread`), the choice of the next runs to measure (:mod:`.suggest`) and Prophecy's
kernel coupling (:mod:`.coupling`). No store, no HTTP: the service and the `ppe` command do
those. See docs/empirical.md and docs/runs.md.
"""

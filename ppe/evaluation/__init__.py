"""Evaluation tools: ``ppe forecast-eval`` (forecast accuracy on recorded traces)."""

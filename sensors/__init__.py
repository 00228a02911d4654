"""Sensor daemon: CPU availability, bandwidth and latency, streamed to PPE without loss."""

"""Placeholder replaced below."""
class ForecastCache:
    def __init__(self, engine, history_limit=20000):
        self.engine = engine

"""Runnable experiments; each writes `results/<experiment>/<run>/`."""

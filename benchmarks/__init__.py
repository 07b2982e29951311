"""Benchmarks: figures printed by runnable scripts, never asserted in tests."""

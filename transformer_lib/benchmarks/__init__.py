"""Benchmark scripts: measured speeds printed as tables, never asserted in tests.

python -m transformer_lib.benchmarks.kv_cache      # the key-value cache's speed-up (lesson 10)
"""

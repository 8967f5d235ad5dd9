"""Benchmark scripts: measured speeds printed as tables, never asserted in tests.

python -m transformer_lib.benchmarks.training_speed  # training throughput and MFU, ours against nn.Transformer
python -m transformer_lib.benchmarks.profile_step    # where the time of one training step goes
python -m transformer_lib.benchmarks.decode_speed    # a trained translator on a whole test set
python -m transformer_lib.benchmarks.kv_cache        # the key-value cache's speed-up (lesson 10)
python -m transformer_lib.benchmarks.attention_cost  # attention's time and memory against length (lesson 12)
"""

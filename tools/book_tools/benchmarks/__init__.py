"""The book's benchmarks, run by its maintainers: measurements printed as tables and kept as records.

python -m book_tools.benchmarks.training_speed      # training throughput and MFU, ours against nn.Transformer
python -m book_tools.benchmarks.profile_step        # where the time of one training step goes
python -m book_tools.benchmarks.decode_speed        # a trained translator on a whole test set
python -m book_tools.benchmarks.confidence          # the translator page's confidence, in and outside its domain
python -m book_tools.benchmarks.length_limit        # the output length limit against BLEU on the three test sets
python -m book_tools.benchmarks.onnx_precision      # the ONNX files' size and BLEU at each precision
python -m book_tools.benchmarks.page_speed          # the look-inside page in headless Chromium
python -m book_tools.benchmarks.cpu_speed           # updates per second of lesson 11's CPU recipe
python -m book_tools.benchmarks.checkpoint_average  # how many checkpoints the CPU recipe averages

The ones the lessons run are the library's (:mod:`transformer_lib.benchmarks`), with the helpers all
of them share. The sweeps that made the CPU recipe's runs are YAML files in ``experiments/``.
"""

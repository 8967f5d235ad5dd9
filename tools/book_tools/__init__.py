"""The book's own tools, apart from the library: what its maintainers and instructors run.

* :mod:`book_tools.coursework`: the assignments built with Otter-Grader and graded with each
  submission's code in a sandbox, apart from the tests (``python -m book_tools assign``, ``grade``);
* :mod:`book_tools.web`: the translator exported to ONNX for the website, and a local server that
  serves the built site as GitHub Pages does (``python -m book_tools export-onnx``);
* :mod:`book_tools.sweep` and :mod:`book_tools.records`: many training runs side by side on one GPU
  (``python -m book_tools sweep``), and their records filed under ``results/``;
* :mod:`book_tools.benchmarks`: the measurements kept as records (``python -m book_tools.benchmarks.NAME``)
  that the lessons do not run.

Everything here may import :mod:`transformer_lib`; the library never imports this package, so a
learner who installs the library gets the Transformer and its lessons' helpers, nothing else.
"""

"""The translator in a web browser: ONNX export (:mod:`.export`) and ONNX Runtime Web (:mod:`.runtime`).

The built site served on localhost, for a browser that tests or times it, is :mod:`.serve`.
"""

"""The translator in a web browser: ONNX export (:mod:`.export`) and ONNX Runtime Web (:mod:`.runtime`)."""

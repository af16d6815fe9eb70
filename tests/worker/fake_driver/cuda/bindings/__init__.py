"""See `driver`: a stand-in for cuda-bindings, put first on a test worker's `PYTHONPATH`."""

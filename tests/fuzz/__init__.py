"""Differential testing (issue #32): generated kernels, a plain-Python reference of the
language, and the interpreter (and GPU) compared bit for bit. Entry point: `python -m tests.fuzz`."""

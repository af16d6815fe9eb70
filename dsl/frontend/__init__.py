"""The frontend: Python AST to MLIR with source locations, and the static (AST-only) checks."""

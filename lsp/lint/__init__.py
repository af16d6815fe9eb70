"""`kdsl lint`: the editor's checks as a batch command for CI and pre-commit.

Data flows through one module per step: `config` (pyproject + CLI) -> `discovery` (which
files) -> `runner` (read, results kept by `lsp.result_cache`, static tier, compiler tier in
`lsp.worker` processes, merge and filter with `lsp.analysis`) -> `formats` / `sarif` (render) -> `cli` (exit code).
"""

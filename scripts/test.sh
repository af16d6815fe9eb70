#!/usr/bin/env bash
# Installs the test dependencies and runs every test: ruff, `kdsl lint examples/`, pytest on two workers
# (with pyright in standard and basic modes and mypy on examples/; GPU tests skip without a GPU), and the
# VS Code extension's checks.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e ".[test]"
ruff check .
# pyright on examples/ in standard mode ([tool.pyright]) and basic mode (tests/typing/pyright-basic.json), and mypy
# with dsl.mypy_plugin ([tool.mypy]), run inside pytest (tests/typing/test_examples_typecheck.py), so each runs once;
# they are installed above, and the typing tests would skip without them, so their absence fails here first
# (`pyright --version` also sets up pyright's own Node.js package once, before two workers would)
pyright --version >/dev/null && python -c "import mypy"
kdsl lint examples/
# two workers (the two cores of a CI machine) that take tests from each other's queue as they
# free up: the long tests (typing checks, AOTInductor packages, exports) no longer end the run on
# one worker while the other idles (524 s against 587 s with the default scheduling, same machine)
python -m pytest -q -n 2 --dist worksteal
if command -v npm >/dev/null 2>&1; then
  (cd vscode-extension && npm ci --no-audit --no-fund && npm run typecheck && npm test && npx --no-install vsce package --out /tmp/kdsl-ci.vsix)
else
  echo "npm not found: the VS Code extension's checks need Node.js 20 and npm" >&2
  exit 1
fi

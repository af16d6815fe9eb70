#!/usr/bin/env bash
# Installs the test dependencies and runs every test: ruff, pyright (standard and basic
# modes) and mypy on examples/, pytest on two workers (GPU tests skip without a GPU), `kdsl lint examples/`,
# and the VS Code extension's checks.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e ".[test]"
ruff check .
pyright                                    # examples/ in standard mode ([tool.pyright])
pyright -p tests/typing/pyright-basic.json # examples/ in basic mode
mypy                                       # examples/ with dsl.mypy_plugin ([tool.mypy])
kdsl lint examples/
python -m pytest -q -n 2  # two workers: the two cores of a CI machine
if command -v npm >/dev/null 2>&1; then
  (cd vscode-extension && npm ci --no-audit --no-fund && npm run typecheck && npm test && npx --no-install vsce package --out /tmp/kdsl-ci.vsix)
else
  echo "npm not found: the VS Code extension's checks need Node.js 20 and npm" >&2
  exit 1
fi

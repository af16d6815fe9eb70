#!/usr/bin/env bash
# The editor end-to-end walk (tests/editor/): installs code-server, chromium, neovim and
# Playwright (scripts/install-editor-e2e.sh), packages the VS Code extension as CI ships it,
# then runs the VS Code walk in code-server and the Neovim protocol check. Screenshots, the
# kdsl output channel and code-server's log land in tests/editor/artifacts/.
# Run from the project's activated virtual environment with kdsl installed (`pip install -e .`).
set -euo pipefail
cd "$(dirname "$0")/.."

KDSL_CODE_SERVER="$(bash scripts/install-editor-e2e.sh | tail -n 1)"
export KDSL_CODE_SERVER

vsix_dir="$(mktemp -d)"
trap 'rm -rf "$vsix_dir"' EXIT
(cd vscode-extension && npm ci --no-audit --no-fund && npx --no-install vsce package --out "$vsix_dir/kdsl.vsix")
export KDSL_E2E_VSIX="$vsix_dir/kdsl.vsix"

# tests/editor/conftest.py collects these tests only with KDSL_EDITOR_E2E=1, so that the
# README's plain `python -m pytest` (which has none of these installs) leaves them out.
KDSL_EDITOR_E2E=1 timeout 900 python -m pytest tests/editor -v

#!/usr/bin/env bash
# Installs what the editor end-to-end tests (tests/editor/) drive: code-server 4.100.3 from the
# npm registry, Debian's chromium, ripgrep and neovim, and Playwright for Python into the
# active virtual environment. Safe to run again: each part is skipped when already there.
#
# code-server is installed with --ignore-scripts because its postinstall (and @vscode/ripgrep's)
# downloads binaries from GitHub. This script does by hand what that postinstall does: install
# the bundled VS Code's own dependencies, link its helper scripts, point @vscode/ripgrep at
# Debian's /usr/bin/rg, and build the native modules against the Node.js headers on this
# machine (node-gyp would otherwise download them). Playwright drives Debian's chromium
# (`executable_path`); `playwright install` is never run.
#
# Environment: KDSL_E2E_PREFIX (default ~/.cache/kdsl-editor-e2e) is where code-server goes;
# the script prints the path of its `code-server` on the last line.
set -euo pipefail

CODE_SERVER_VERSION=4.100.3
PLAYWRIGHT_VERSION=1.65.2
PREFIX="${KDSL_E2E_PREFIX:-$HOME/.cache/kdsl-editor-e2e}"
CODE_SERVER="$PREFIX/bin/code-server"

log() { echo "install-editor-e2e: $*" >&2; }

install_debian_packages() {
  local missing=()
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  [ -x /usr/bin/rg ] || missing+=(ripgrep)
  [ -x /usr/bin/nvim ] || missing+=(neovim)
  if [ ${#missing[@]} -eq 0 ]; then
    return
  fi
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    sudo=(sudo)
  fi
  log "apt-get install ${missing[*]}"
  "${sudo[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
}

install_code_server() {
  # `--config /dev/null`: code-server would otherwise write a default ~/.config/code-server/config.yaml.
  if [ -x "$CODE_SERVER" ] && "$CODE_SERVER" --config /dev/null --version 2>/dev/null | grep -q "^$CODE_SERVER_VERSION "; then
    return
  fi
  log "npm install code-server@$CODE_SERVER_VERSION into $PREFIX"
  npm install -g --prefix "$PREFIX" --ignore-scripts --no-audit --no-fund "code-server@$CODE_SERVER_VERSION"
  local root="$PREFIX/lib/node_modules/code-server"
  # node-gyp takes the headers of the installed Node.js instead of downloading them.
  local nodedir
  nodedir="$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")"
  if [ ! -f "$nodedir/include/node/node_api.h" ]; then
    log "no Node.js headers under $nodedir/include/node: the native modules cannot be built"
    exit 1
  fi
  export npm_config_nodedir="$nodedir"

  # What code-server's postinstall.sh does, without its downloads.
  (cd "$root" && npm rebuild --build-from-source argon2)
  (
    cd "$root/lib/vscode"
    npm install --omit=dev --ignore-scripts --no-audit --no-fund
    ln -sfn node_modules node_modules.asar
    ln -sfn code-linux.sh bin/remote-cli/code-server
    ln -sfn browser-linux.sh bin/helpers/browser.sh
    mkdir -p node_modules/@vscode/ripgrep/bin
    ln -sfn /usr/bin/rg node_modules/@vscode/ripgrep/bin/rg
    # The native modules VS Code loads on Linux. node-pty's own postinstall only cleans its
    # build folder and runs `npx node-gyp` (a download): rebuilding with node-gyp directly
    # makes the same binaries. @parcel/watcher ships a prebuilt linux-x64 package.
    local gyp
    gyp="$(npm root -g)/npm/node_modules/node-gyp/bin/node-gyp.js"
    for module in @vscode/spdlog native-watchdog node-pty @vscode/deviceid; do
      (cd "node_modules/$module" && node "$gyp" rebuild --nodedir="$nodedir" >/dev/null)
    done
    cd extensions
    npm install --omit=dev --ignore-scripts --no-audit --no-fund
  )
  "$CODE_SERVER" --config /dev/null --version >&2
}

install_playwright() {
  if python -c "import playwright" 2>/dev/null; then
    return
  fi
  log "pip install playwright==$PLAYWRIGHT_VERSION"
  python -m pip install -q "playwright==$PLAYWRIGHT_VERSION"
}

if [ -z "${VIRTUAL_ENV:-}" ]; then
  log "activate the project's virtual environment first (. .venv/bin/activate)"
  exit 1
fi
install_debian_packages
install_code_server
install_playwright
echo "$CODE_SERVER"

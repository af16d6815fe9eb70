"""The editor end-to-end tests run only when asked for: `KDSL_EDITOR_E2E=1`.

They drive real editors (code-server in Chromium, Neovim), which the README's plain
`python -m pytest` does not install; `scripts/editor-e2e.sh` installs them, sets the variable
and runs this folder. Once asked for, nothing here skips: a missing code-server, Chromium,
Neovim or .vsix is a failure that says what to install.

Artifacts (screenshots of each step, the kdsl output channel, code-server's log) go to
`tests/editor/artifacts/` (ignored by git), or to `KDSL_E2E_ARTIFACTS`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

HERE = Path(__file__).parent
DATA = HERE / "data"
ENABLED = os.environ.get("KDSL_EDITOR_E2E") == "1"

collect_ignore_glob = [] if ENABLED else ["test_*.py"]


def required_file(variable: str, default: str, what: str) -> Path:
    """The path `variable` names (or `default`, looked up on PATH); fails when it is missing."""
    value = os.environ.get(variable, default)
    found = shutil.which(value) or (value if Path(value).is_file() else None)
    if found is None:
        pytest.fail(f"{what} not found ({variable}={value!r}): run `bash scripts/editor-e2e.sh`, which installs it")
    return Path(found)


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """A fresh folder for this run's screenshots and logs (kept by CI)."""
    folder = Path(os.environ.get("KDSL_E2E_ARTIFACTS", HERE / "artifacts"))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder

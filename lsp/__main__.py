"""`python -m lsp` starts the language server (stdio unless `--tcp HOST:PORT`).

The current folder, which `-m` puts first on `sys.path`, is taken off before the server
(and with it the compiler) is imported: see `lsp.cli.drop_workspace_from_path`.
"""

import sys

from lsp.cli import drop_workspace_from_path

drop_workspace_from_path()

from lsp.server import main  # noqa: E402 - only after the workspace left sys.path

sys.exit(main())

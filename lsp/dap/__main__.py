"""`python -m lsp.dap`: the debug adapter over stdio (what the VS Code extension starts).

The current folder leaves `sys.path` first, as for the language server
(`lsp.cli.drop_workspace_from_path`): the debugged program's folder is added when it runs.
"""

import sys

from lsp.cli import drop_workspace_from_path

drop_workspace_from_path()

from lsp.dap.server import main  # noqa: E402 - only after the workspace left sys.path

sys.exit(main())

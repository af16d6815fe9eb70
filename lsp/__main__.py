"""`python -m lsp` starts the language server (stdio unless `--tcp HOST:PORT`)."""

import sys

from lsp.server import main

sys.exit(main())

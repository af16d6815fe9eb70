"""Creates `executed.marker` in the current folder when its top level runs."""

from pathlib import Path

Path("executed.marker").write_text("this module was executed\n")

"""Imports `appears_later`, a sibling module that does not exist when it is first checked:
DSL001 (ModuleNotFoundError) at line 4; nothing once the module exists."""

import appears_later  # noqa: F401

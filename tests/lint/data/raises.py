"""A top-level statement raises: DSL001 (error) on line 4, the rest of the module still runs."""

VALUE = 1
raise ValueError("boom")

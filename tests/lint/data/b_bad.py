"""A top-level statement raises: DSL001 on line 4, whatever a file checked before it did."""

VALUE = 1
raise ValueError("b_bad")

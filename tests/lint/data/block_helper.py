"""The block size `block_from_helper.py` launches with. Nothing to report."""

BLOCK = 128

"""Appends a line to `runs.log` in the current folder each time its top level runs: how a
test counts the runs lint made of it. Nothing to report."""

with open("runs.log", "a") as log:
    log.write("ran\n")

"""Never finishes its top level: the worker's time limit turns it into DSL002."""

while True: pass  # noqa: E701 - one line, so the reported line is the same whichever bytecode runs

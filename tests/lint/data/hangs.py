"""Never finishes its top level: the worker's time limit turns it into DSL002."""

while True:
    pass

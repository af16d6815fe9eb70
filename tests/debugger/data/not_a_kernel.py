"""Plain Python: no kernel here, so no breakpoint of the kernel debugger can stop in it."""


def add(a, b):
    return a + b

"""A debugger for kernels, on the CPU interpreter: breakpoints at Python lines, a focus thread.

`session.DebugSession` runs a program with the interpreter attached (`dsl.interpreter.stepping`)
and stops it at breakpoints (`breakpoints`), steps and faults; while it is stopped it answers
with the focus thread's variables (`variables`, `thread_values`) and evaluates expressions in
that thread's scope (`evaluate`). It knows no protocol: the Debug Adapter Protocol front end
is `lsp.dap` (`kdsl debug`).
"""

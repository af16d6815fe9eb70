"""The Debug Adapter Protocol front end of `dsl.debugger`: `kdsl debug`, `python -m lsp.dap`.

`server` answers the protocol's requests over stdio and forwards the session's events;
`stdio` keeps the program's own output off the protocol's channel.
"""

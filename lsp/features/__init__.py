"""LSP handlers, one module per handler group; each exposes `register(server)`."""

"""Built-in target definitions (``builtin.toml``)."""

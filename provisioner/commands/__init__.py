"""Implementations of the CLI commands (one module per command group)."""

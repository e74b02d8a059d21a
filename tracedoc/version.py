"""tracedoc's version: one place, read by the package, the CLI, the cache key and the packaging metadata."""

__version__ = "0.1.0"

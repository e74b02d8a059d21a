"""The store: one DuckDB database per analysed input set, the one place trace data lives."""

from tracedoc.store.cache import memory_store, open_cached_store
from tracedoc.store.store import SCHEMA_VERSION, Store

__all__ = ["SCHEMA_VERSION", "Store", "memory_store", "open_cached_store"]

"""Nsight Systems: reports and their SQLite exports (nsys), the SQL that normalizes them (nsys_sql) and the
SQLite → Arrow reader (sqlite_arrow), with their tables.
"""

from pathlib import Path

SQLITE_MAGIC = b"SQLite format 3\x00"  # an SQLite file's first bytes: an export, where an .nsys-rep is a report


def is_sqlite(path: Path) -> bool:
    """Whether the file at ``path`` begins as an SQLite database does (an export, not a report)."""
    with path.open("rb") as f:
        return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC

"""Nsight Systems: reports and their SQLite exports (nsys), the SQL that normalizes them (nsys_sql) and the
SQLite → Arrow reader (sqlite_arrow), with their tables.
"""

SQLITE_MAGIC = b"SQLite format 3\x00"  # an SQLite file's first bytes: an export, where an .nsys-rep is a report

"""Nsight Systems: reports and their SQLite exports (nsys), the SQL that normalizes them (nsys_sql) and the
SQLite → Arrow reader (sqlite_arrow), with their tables.
"""

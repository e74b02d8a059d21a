"""Make Nsight Systems SQLite exports fit to share, in place: the environment nsys copied out of the profiled
processes is replaced, and the CPU sampling tables tracedoc does not read are dropped.

nsys keeps each profiled process's whole environment three ways: as ``PROCESS_n:ENVIRONMENT_VARIABLE`` rows of
META_DATA_CAPTURE (``NAME="value"``), as TARGET_INFO_SYSTEM_ENV's ``DeviceEnvironment`` and as NUL-separated
``NAME=value`` blocks in StringIds. Every value becomes ``<redacted>``, except the launcher's rank variables
(RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE: small integers that say which rank a report is). Then the file is
vacuumed. Prints, per export, what it kept and what it replaced (names and counts, never a value).

  python3 workloads/redact_export.py out/nsys-ddp/rank0.sqlite out/nsys-ddp/rank1.sqlite
"""

from __future__ import annotations

import re
import sqlite3
import sys
from pathlib import Path

KEPT = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
UNREAD = ("SAMPLING_CALLCHAINS", "OSRT_CALLCHAINS", "COMPOSITE_EVENTS", "SCHED_EVENTS")
REDACTED = "<redacted>"
_ENV_BLOCK = re.compile(r"[A-Za-z_]\w*=[^\x00]*\x00[A-Za-z_]\w*=")
_KEPT_VALUE = re.compile(r'^(?:' + '|'.join(KEPT) + r')="?[0-9]{1,6}"?$')


def redact(path: Path) -> str:
    """Redact one export in place; a line saying what was done."""
    con = sqlite3.connect(path)
    try:
        tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        kept = replaced = blocks = 0
        if "META_DATA_CAPTURE" in tables:
            rows = con.execute("SELECT rowid, value FROM META_DATA_CAPTURE "
                               "WHERE name LIKE '%ENVIRONMENT_VARIABLE'").fetchall()
            for rowid, value in rows:
                if _KEPT_VALUE.match(str(value)):
                    kept += 1
                    continue
                name = str(value).split("=", 1)[0]
                con.execute("UPDATE META_DATA_CAPTURE SET value = ? WHERE rowid = ?", (f'{name}="{REDACTED}"', rowid))
                replaced += 1
        if "TARGET_INFO_SYSTEM_ENV" in tables:
            con.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = ? WHERE name = 'DeviceEnvironment'", (REDACTED,))
        if "StringIds" in tables:
            for rowid, value in con.execute("SELECT id, value FROM StringIds").fetchall():
                if isinstance(value, str) and _ENV_BLOCK.search(value):
                    con.execute("UPDATE StringIds SET value = ? WHERE id = ?", (REDACTED, rowid))
                    blocks += 1
        dropped = sorted(tables.intersection(UNREAD))
        for table in dropped:
            con.execute(f'DROP TABLE "{table}"')
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()
    return (f"{path}: kept {kept} rank variable(s), replaced {replaced} environment variable(s) and {blocks} "
            f"environment block(s), dropped {', '.join(dropped) or 'nothing'}; {path.stat().st_size / 1e6:.1f} MB")


def main() -> None:
    for name in sys.argv[1:]:
        print(redact(Path(name)))


if __name__ == "__main__":
    main()

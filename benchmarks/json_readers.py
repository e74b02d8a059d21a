"""Measure JSON parsers against tracedoc's Chrome-trace reader on one large trace (for docs/speed.md, never tests).

Each method runs in its own process, the methods alternating round by round; a process reports the CPU seconds
(user + system) of the read itself, after its imports, and its peak RSS. Methods whose library is not installed
are left out (pysimdjson, msgspec and orjson are not tracedoc's dependencies; polars and pyarrow are).

    python benchmarks/tile_trace.py samples/decode-eager/trace.json.gz /tmp/large.json --min-mb 200
    python benchmarks/json_readers.py /tmp/large.json --rounds 3
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import mmap
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The fields tracedoc reads of each event (tracedoc/ingest/chrome/kineto.py _COLUMNS), as Python would pull them out.
_FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args")


def _read(path: Path) -> int:
    """The I/O floor: the file's bytes read and their lines counted."""
    return path.read_bytes().count(b"\n")


def _chrome_trace(path: Path, normalize: bool) -> int:
    """tracedoc's reader: the event array cut into part files and parsed by DuckDB's read_json into the columns
    Kineto names (2 threads); with ``normalize``, the whole ingest of the file (also the normalisation SQL). The
    store is made before the clock starts (``_STORE``)."""
    from tracedoc.ingest.chrome import chrome_trace, kineto

    store = _STORE[0]
    with tempfile.TemporaryDirectory() as tmp:
        if normalize:
            return kineto.load(store, 0, path, Path(tmp)).event_count
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            _, start, end = chrome_trace._locate_events(mm, path, kineto.KINETO)
            cuts = chrome_trace._event_cuts(mm, start, end, chrome_trace._part_bytes(end - start, 2))
            parts = [chrome_trace.Part(p, 0, 0, path) for a, b in zip(cuts, cuts[1:])
                     if (p := chrome_trace._write_part(mm, f.fileno(), a, b, Path(tmp) / f"p{a}.json", path))]
        return sum(chrome_trace._read_events(store.con, parts, kineto.KINETO, None)[0].values())


_STORE: list[Any] = []


def _make_store() -> None:
    from tracedoc.ingest.chrome import kineto  # noqa: F401 (imported before the clock starts)
    from tracedoc.store import Store

    _STORE.append(Store.create(None))
    _STORE[0].con.execute("SET threads = 2")


def _simdjson(path: Path, columns: bool) -> int:
    """pysimdjson's DOM parse; with ``columns``, tracedoc's fields then pulled out into a Python list each."""
    import simdjson

    doc: Any = simdjson.Parser().parse(path.read_bytes())
    events = doc["traceEvents"]
    if not columns:
        return len(events)
    out: dict[str, list[Any]] = {k: [] for k in _FIELDS}
    for event in events:
        for key in _FIELDS:
            out[key].append(event.get(key))
    return len(out["ph"])


def _msgspec(path: Path) -> int:
    """msgspec's typed decode of only tracedoc's fields (``args`` kept raw), into one Struct per event."""
    import msgspec

    optional = [("ph", str), ("cat", str), ("name", str), ("pid", int | str), ("tid", int | str), ("ts", float),
                ("dur", float), ("id", int | str)]
    fields = [(name, kind | None, None) for name, kind in optional] + [("args", msgspec.Raw, msgspec.Raw())]
    event = msgspec.defstruct("Event", fields)
    trace = msgspec.defstruct("Trace", [("traceEvents", list[event])])  # type: ignore[valid-type]

    decoded: Any = msgspec.json.decode(path.read_bytes(), type=trace)
    return len(decoded.traceEvents)


# The fields tracedoc reads of each event's "args" (tracedoc/ingest/chrome/kineto.py _ARGS_TYPE).
_ARGS = ("device", "stream", "correlation", "External id", "bytes", "registers per thread", "shared memory",
         "Collective name", "grid", "block", "Process Group Name", "Process Group Description", "Group size",
         "dtype", "In msg nelems", "Out msg nelems", "In split size", "Out split size", "Input Dims", "Input type",
         "Concrete Inputs")


def _msgspec_arrow(path: Path) -> int:
    """msgspec's typed decode of tracedoc's fields, those of ``args`` too, then each field made an Arrow column
    (numbers as float64, the rest as text, as DuckDB's reader gives them to tracedoc): the cost of columnar output
    through a Python parser."""
    import msgspec
    import pyarrow as pa

    args = msgspec.defstruct("Args", [(f"a{i}", Any, None) for i in range(len(_ARGS))],
                             rename={f"a{i}": name for i, name in enumerate(_ARGS)})
    fields: list[tuple[str, Any, Any]] = [(name, Any, None) for name in _FIELDS if name != "args"]
    event = msgspec.defstruct("Event", [*fields, ("args", args | None, None)])
    trace = msgspec.defstruct("Trace", [("traceEvents", list[event])])  # type: ignore[valid-type]
    events = msgspec.json.decode(path.read_bytes(), type=trace).traceEvents  # type: ignore[attr-defined]

    def text(values: list[Any]) -> pa.Array:
        return pa.array([None if v is None else v if isinstance(v, str) else str(v) for v in values], pa.string())

    columns = {name: text([getattr(e, name) for e in events]) for name in ("ph", "cat", "name", "pid", "tid", "id")}
    for name in ("ts", "dur"):
        columns[name] = pa.array([getattr(e, name) for e in events], pa.float64())
    for i, name in enumerate(_ARGS):
        columns[name] = text([None if e.args is None else getattr(e.args, f"a{i}") for e in events])
    return len(pa.table(columns))


# The fields of "args" that hold text or numbers (the rest hold JSON lists: grid, block and the shapes).
_ARGS_SCALAR = tuple(name for name in _ARGS if name not in ("grid", "block", "Input Dims", "Input type",
                                                            "Concrete Inputs"))


def _event_array(path: Path, out: Path, newline_delimited: bool) -> Path:
    """The trace's event array alone, written to ``out`` as a JSON array (or one event per line): the shapes the
    Arrow readers read, cut as tracedoc cuts its parts."""
    import re

    from tracedoc.ingest.chrome import chrome_trace, kineto

    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        _, start, end = chrome_trace._locate_events(mm, path, kineto.KINETO)
        body = mm[mm.find(b"{", start, end):end]
    if newline_delimited:
        out.write_bytes(re.sub(rb"\}\s*,[ \t]*\r?\n\s*\{", b"}\n{", body).rstrip().rstrip(b","))
    else:
        out.write_bytes(b"[" + body + b"]")
    return out


def _polars(path: Path) -> int:
    """polars' ``read_json`` of the event array with a schema of tracedoc's fields and the args' text fields (its
    JSON-list fields left out: polars would need a type for each shape of list), numbers read as text where
    tracedoc reads them so."""
    import polars as pl

    text = ("ph", "cat", "name", "pid", "tid", "id")
    schema: dict[str, Any] = {name: pl.String for name in text} | {"ts": pl.Float64, "dur": pl.Float64}
    schema["args"] = pl.Struct({name: pl.String for name in _ARGS_SCALAR})
    with tempfile.TemporaryDirectory() as tmp:
        return pl.read_json(_event_array(path, Path(tmp) / "events.json", False), schema=schema).height


def _pyarrow(path: Path) -> int:
    """pyarrow's JSON reader (newline-delimited JSON only: the event array rewritten one event per line) with an
    explicit schema of the same fields."""
    import pyarrow as pa
    import pyarrow.json as pa_json

    text = ("ph", "cat", "name", "pid", "tid", "id")
    fields = [pa.field(name, pa.string()) for name in text] + [pa.field("ts", pa.float64()),
                                                                pa.field("dur", pa.float64())]
    fields.append(pa.field("args", pa.struct([pa.field(name, pa.string()) for name in _ARGS_SCALAR])))
    options = pa_json.ParseOptions(explicit_schema=pa.schema(fields), unexpected_field_behavior="ignore")
    with tempfile.TemporaryDirectory() as tmp:
        events = _event_array(path, Path(tmp) / "events.ndjson", True)
        return pa_json.read_json(events, parse_options=options).num_rows


def _orjson(path: Path) -> int:
    """orjson's parse into dicts."""
    import orjson

    return len(orjson.loads(path.read_bytes())["traceEvents"])


# Each method: its name, the modules it needs (space-separated; None: tracedoc's own) and what it runs.
METHODS: dict[str, tuple[str | None, Callable[[Path], int]]] = {
    "read() and count lines (I/O floor)": (None, _read),
    "tracedoc: parts + DuckDB read_json (2 threads)": (None, lambda p: _chrome_trace(p, False)),
    "tracedoc: the whole ingest (read + normalise)": (None, lambda p: _chrome_trace(p, True)),
    "pysimdjson: DOM parse": ("simdjson", lambda p: _simdjson(p, False)),
    "pysimdjson: DOM + fields to lists": ("simdjson", lambda p: _simdjson(p, True)),
    "msgspec: typed decode, tracedoc's fields": ("msgspec", _msgspec),
    "msgspec: typed decode incl. args, then Arrow columns": ("msgspec pyarrow", _msgspec_arrow),
    "orjson: loads": ("orjson", _orjson),
    "polars: read_json of the event array, text fields of args": ("polars", _polars),
    "pyarrow: read_json of the events one per line, the same fields": ("pyarrow", _pyarrow),
}


def _child(method: str, path: Path) -> None:
    """Run one method in this process and print its CPU seconds, peak RSS and count as JSON."""
    module, run = METHODS[method]
    if method.startswith("tracedoc"):
        _make_store()
    for name in (module or "").split():  # imported before the clock starts
        imported = importlib.import_module(name)
        if name == "pyarrow":  # its first table costs 0.4 s once per process: not the reading's
            imported.table({"warm": imported.array([0.0])})
    before = resource.getrusage(resource.RUSAGE_SELF)
    try:
        count = run(path)
    except Exception as exc:  # a reader that refuses the trace: said in the table
        print(json.dumps({"error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}))
        return
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(json.dumps({"cpu": cpu, "user": after.ru_utime - before.ru_utime, "rss_mb": after.ru_maxrss / 1024,
                      "count": count}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path, help="a large plain Chrome-trace JSON file")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.trace)
        return
    methods = [m for m, (module, _) in METHODS.items()
               if all(importlib.util.find_spec(name) for name in (module or "").split())]
    results: dict[str, list[dict[str, float]]] = {m: [] for m in methods}
    for _ in range(args.rounds):
        for method in methods:
            out = subprocess.run([sys.executable, __file__, str(args.trace), "--child", method], check=True,
                                 capture_output=True, text=True).stdout
            results[method].append(json.loads(out.strip().splitlines()[-1]))
    mb = args.trace.stat().st_size / 1e6
    print(f"{args.trace}: {mb:.1f} MB; medians of {args.rounds} alternating runs")
    print("| method | CPU s | user s | MB per CPU-s | peak RSS (MB) | events |")
    print("|---|---|---|---|---|---|")
    for method, runs in results.items():
        if "error" in runs[0]:
            print(f"| {method} | refused: {runs[0]['error']} | | | | |")
            continue
        cpu = statistics.median(r["cpu"] for r in runs)
        user = statistics.median(r["user"] for r in runs)
        rss = statistics.median(r["rss_mb"] for r in runs)
        print(f"| {method} | {cpu:.2f} | {user:.2f} | {mb / cpu:.0f} | {rss:.0f} | {int(runs[0]['count']):,} |")


if __name__ == "__main__":
    main()

"""A mutation fuzzer for ``tracedoc analyze``: corrupted copies of the bundled samples, run in subprocesses.

The contract under test: for any input, ``tracedoc analyze PATH --no-cache [--format text|json|md]`` exits 0 or
2, never prints a Python traceback, finishes within 60 s and stays under 2 GB of RSS; exit 2 comes with exactly
one line on stderr; the text and Markdown reports carry no raw control characters from the input.

Every mutant is named by a stable id ``FORMAT/KIND/SEED`` (e.g. ``kineto/extreme/1234``): the id alone rebuilds
the same bytes (``build_mutant``) and picks the report format, so ``python benchmarks/fuzz.py --repro ID``
reproduces any failure. Mutants start from small samples or trimmed copies, so one run takes a few seconds.

Mutations, by the format of the input:

- every format: bit and byte flips, truncation of the raw bytes (of the decompressed bytes for gzip/xz inputs);
- gzip (Kineto traces; flight-recorder dumps and other JSON wrapped in gzip): flipped compressed bytes, a bad
  deflate block, a wrong CRC or length, truncation, trailing garbage, and valid variants that must still be read
  (FEXTRA/FNAME/FCOMMENT/FHCRC header fields, several members);
- JSON (Kineto, flight-recorder JSON, NVML recordings, GEMM ladder): deleted fields, wrong-typed fields, extreme
  numbers (1e308, -1, 2**63, 2**64, NaN/Infinity, 10**400 and 10**5000 written as text), 100,000 levels of
  nesting, hostile names (terminal escapes, OSC 8 links, Rich markup, HTML, Markdown headings, lone surrogates);
- CSV (Nsight Compute exports): deleted columns, wrong-typed and extreme cells, hostile kernel names, broken
  structure (no units row, repeated header, ragged rows, ncu's own log lines), encodings (BOM, UTF-16, bad UTF-8);
- SQLite (Nsight Systems exports): UPDATEs with extreme, negative, NULL, wrong-typed or hostile values, dropped
  tables and columns, deleted rows;
- pickle (flight-recorder dumps, allocator snapshots): opcode-level edits only (dropped or repeated opcodes,
  replaced values, deep nesting, bad memo references, a forbidden global); the harness never unpickles anything;
- Parquet (telemetry): extreme, wrong-typed, dropped and hostile columns, broken schema metadata, no rows;
- Nsight Compute reports (.ncu-rep, .ncu-rep.xz): flips, zeroed ranges, truncation, corrupt xz.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import gzip
import io
import json
import lzma
import math
import os
import pickle
import pickletools
import random
import re
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tracedoc.formats import FORMATS as DECLARED

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"

OUTPUT_FORMATS = ("text", "json", "md")
TIMEOUT_S = 60.0
RSS_LIMIT_MB = 2048
# A run past this is killed at once, so that a runaway mutant cannot take the machine's memory.
RSS_KILL_MB = 3072

HOSTILE_NAMES = (
    "\x1b[2J",
    "\x1b]8;;http://evil.example/\x07x\x1b]8;;\x07",
    "[link=http://evil.example/]x[/link]",
    "kern[/]",
    "<script>alert(1)</script>",
    "\r\n# injected heading",
    "\ud800",
    "\x9b2J\x07\x00",
    "{0}{rank}{__class__}%s%n",
    "k" * 20000,
)
EXTREME_NUMBERS: tuple[Any, ...] = (
    1e308, -1e308, -1, 0, -0.0, 2**63, 2**64, -(2**63) - 1, 2**63 - 1, 2**31, 5e-324,
    math.nan, math.inf, -math.inf,
)
# Numbers that Python's json cannot write: spliced into the JSON text in place of a placeholder string.
NUMBER_TEXTS = ("1" + "0" * 400, "-1" + "0" * 400, "1e400", "1" + "0" * 5000, "1.5e-400")
NEST_DEPTH = 100_000
EXECUTED_MARKER = "TRACEDOC-FUZZ-EXECUTED"
_PLACEHOLDER = "__tracedoc_fuzz_raw_{}__"


# ---------------------------------------------------------------------------------------------------------------
# Mutant ids and bases
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class MutantId:
    """A mutant's stable name: the input format, the kind of mutation and the seed of its random choices."""

    fmt: str
    kind: str
    seed: int

    def __str__(self) -> str:
        return f"{self.fmt}/{self.kind}/{self.seed}"

    @classmethod
    def parse(cls, text: str) -> MutantId:
        """The id written as ``FORMAT/KIND/SEED``."""
        fmt, kind, seed = text.strip().split("/")
        if fmt not in FORMATS or kind not in FORMATS[fmt].kinds:
            raise ValueError(f"unknown mutant id {text!r} (formats: {', '.join(FORMATS)})")
        return cls(fmt, kind, int(seed))

    @property
    def output(self) -> str:
        """The report format this mutant is analysed with (rotates with the seed)."""
        return OUTPUT_FORMATS[self.seed % len(OUTPUT_FORMATS)]


@dataclass(frozen=True)
class Base:
    """A seed input: files copied (or trimmed) from a sample, one of which (``target``) is mutated.

    ``codec`` says how the target is structured (json, kineto, csv, sqlite, pickle, parquet, binary, xz);
    ``single`` analyses the target file alone, otherwise the directory of all ``files``. A sample's ``.gz`` (or ``.xz``)
    file copied under a name without it is unpacked (an allocator snapshot's pickle, mutated as a pickle; an
    xz-compressed Nsight Systems export, mutated through SQLite).
    """

    name: str
    codec: str
    files: tuple[tuple[str, str], ...]  # (name in the mutant's directory, path under samples/)
    target: str
    single: bool = True
    trim: int = 0  # Kineto traces: keep about this many timed events


@dataclass
class Mutant:
    """A mutant written to disk: what to analyse and what was done to it."""

    id: MutantId
    path: Path
    base: str
    note: str
    expect_ok: bool = False  # a valid variant of a readable input (e.g. gzip with header fields)


@dataclass(frozen=True)
class FormatSpec:
    """The bases of one kind of input, the tracedoc format they are read as (``reads``: a name in
    tracedoc.formats.FORMATS) and the kinds of mutation they get."""

    reads: str
    bases: tuple[Base, ...]
    kinds: tuple[str, ...]


_BYTES = ("flip", "truncate")
_GZIP = ("gz-flip", "gz-truncate", "gz-crc", "gz-deflate", "gz-trailing", "gz-header", "gz-multi")
_JSON = ("delete", "wrongtype", "extreme", "deep", "hostile")

_SPECS: dict[str, FormatSpec] = {
    "kineto": FormatSpec("torch", (
        Base("decode-eager", "kineto", (("trace.json.gz", "decode-eager/trace.json.gz"),), "trace.json.gz",
             trim=3000),
        Base("input-slow", "kineto", (("trace.json.gz", "input-slow/trace.json.gz"),), "trace.json.gz", trim=3000),
        Base("decode-compile", "kineto", (("trace.json.gz", "decode-compile/trace.json.gz"),), "trace.json.gz",
             trim=3000),
    ), _BYTES + _GZIP + _JSON),
    "proton": FormatSpec("proton", (
        Base("proton-compiled-mlp", "kineto", (("compiled-mlp.chrome_trace.gz",
                                                "proton-compiled-mlp/compiled-mlp.chrome_trace.gz"),),
             "compiled-mlp.chrome_trace.gz"),
    ), _BYTES + _GZIP + _JSON),
    "kineto-ranks": FormatSpec("torch", (
        Base("ddp-straggler", "kineto", (("rank0.trace.json.gz", "ddp-straggler/rank0.trace.json.gz"),
                                         ("rank1.trace.json.gz", "ddp-straggler/rank1.trace.json.gz")),
             "rank1.trace.json.gz", single=False, trim=4000),
        Base("moe-hot-expert", "kineto", (("rank0.trace.json.gz", "moe-hot-expert/rank0.trace.json.gz"),
                                          ("rank1.trace.json.gz", "moe-hot-expert/rank1.trace.json.gz")),
             "rank0.trace.json.gz", single=False, trim=3000),
    ), _BYTES + _GZIP + _JSON),
    "nsys": FormatSpec("nsys", (
        Base("nsys-nvfuser-h200", "sqlite", (("report1.sqlite", "nsys-nvfuser-h200/report1.sqlite"),),
             "report1.sqlite"),
        Base("nsys-memory-leak", "sqlite", (("report.sqlite", "nsys-memory-leak/sample.sqlite.xz"),), "report.sqlite"),
    ), _BYTES + ("sql-update", "sql-drop", "sql-delete", "sql-hostile")),
    "ncu-csv": FormatSpec("ncu", (
        Base("ncu-a40-julia-csv", "csv", (("kernels.raw.csv",
                                           "ncu-a40-julia-csv/a40_julia_indexspaces.raw.base-units.csv"),),
             "kernels.raw.csv"),
        Base("ncu-h200-torch-csv", "csv", (("kernels.raw.csv",
                                            "ncu-h200-torch-csv/h200_torch_gemm_softmax_full.raw.base-units.csv"),),
             "kernels.raw.csv"),
    ), _BYTES + ("csv-delete", "wrongtype", "extreme", "hostile", "csv-structure", "csv-encoding")),
    "ncu-rep": FormatSpec("ncu", (
        Base("ncu-a40-julia", "binary", (("kernels.ncu-rep", "ncu-a40-julia/a40_julia_indexspaces.ncu-rep"),),
             "kernels.ncu-rep"),
        Base("gemm-ladder-ncu", "xz", (("kernels.ncu-rep.xz", "gemm-ladder-ncu/gemm_ladder_h100_full.ncu-rep.xz"),),
             "kernels.ncu-rep.xz"),
    ), _BYTES + ("zero-range", "xz-flip", "xz-truncate")),
    "fr-pickle": FormatSpec("flight_recorder", (
        Base("hang-4rank-stuck", "pickle", tuple((f"trace_rank_{r}", f"hang-4rank-stuck/trace_rank_{r}")
                                                 for r in range(4)), "trace_rank_2", single=False),
        Base("hang-type-mismatch", "pickle", tuple((f"trace_rank_{r}", f"hang-type-mismatch/trace_rank_{r}")
                                                   for r in range(2)), "trace_rank_1", single=False),
        Base("hang-ondemand-pickle", "pickle", (("ondemand_dump_nccl_trace.pickle.rank0",
                                                 "hang-ondemand-healthy/ondemand_dump_nccl_trace.pickle.rank0"),),
             "ondemand_dump_nccl_trace.pickle.rank0"),
    ), _BYTES + ("pk-drop", "pk-dup", "pk-value", "pk-nest", "pk-global", "pk-memo") + _GZIP),
    "fr-json": FormatSpec("flight_recorder", (
        Base("hang-ondemand-json", "json", tuple(
            (f"ondemand_dump_nccl_trace_json.json.rank{r}",
             f"hang-ondemand-healthy/ondemand_dump_nccl_trace_json.json.rank{r}") for r in range(2)),
             "ondemand_dump_nccl_trace_json.json.rank0", single=False),
        Base("hang-ondemand-json-1", "json", (("ondemand_dump_nccl_trace_json.json.rank1",
                                               "hang-ondemand-healthy/ondemand_dump_nccl_trace_json.json.rank1"),),
             "ondemand_dump_nccl_trace_json.json.rank1"),
    ), _BYTES + _JSON + _GZIP),
    "nvml": FormatSpec("nvml", (
        Base("health-h100", "json", (("nvml-idle.replay.json", "health-h100/nvml-idle.replay.json"),),
             "nvml-idle.replay.json"),
        Base("health-2xh200", "json", (("nvml-load.replay.json", "health-2xh200/nvml-load.replay.json"),),
             "nvml-load.replay.json"),
    ), _BYTES + _JSON + ("gz-header",)),
    "telemetry": FormatSpec("telemetry", (
        Base("health-h100-telemetry", "parquet", (("run.telemetry.parquet", "health-h100/run.telemetry.parquet"),),
             "run.telemetry.parquet"),
        Base("health-2xh200-telemetry", "parquet", (("run.telemetry.parquet",
                                                     "health-2xh200/run.telemetry.parquet"),),
             "run.telemetry.parquet"),
    ), _BYTES + ("pq-extreme", "pq-wrongtype", "pq-drop", "pq-hostile", "pq-meta", "pq-empty")),
    "gemm-ladder": FormatSpec("gemm_ladder", (
        Base("gemm-ladder", "json", (("gemm_ladder.json", "gemm-ladder-ncu/gemm_ladder.json"),), "gemm_ladder.json"),
        Base("gemm-ladder-with-ncu", "json", (
            ("gemm_ladder.json", "gemm-ladder-ncu/gemm_ladder.json"),
            ("kernels.raw.csv", "gemm-ladder-ncu/gemm_ladder_h100_full.raw.base-units.csv")),
             "gemm_ladder.json", single=False),
    ), _BYTES + _JSON),
    "memory-snapshot": FormatSpec("memory_snapshot", (
        Base("memory-oom", "pickle", (("snapshot.pickle", "memory-oom/snapshot.pickle.gz"),), "snapshot.pickle"),
        Base("memory-fragment", "pickle", (("snapshot.pickle", "memory-fragment/snapshot.pickle.gz"),),
             "snapshot.pickle"),
    ), _BYTES + ("pk-drop", "pk-dup", "pk-value", "pk-nest", "pk-global", "pk-memo") + _GZIP),
}
# The mutants' formats, in the order tracedoc sniffs the formats they are read as (every declared format has
# bases here: tests/test_fuzz.py).
FORMATS: dict[str, FormatSpec] = {name: spec for f in DECLARED for name, spec in _SPECS.items() if spec.reads == f.name}

# Codecs whose kinds do not apply to every base of a format.
_KIND_CODECS = {"xz-flip": {"xz"}, "xz-truncate": {"xz"}}


# ---------------------------------------------------------------------------------------------------------------
# Reading the bases
# ---------------------------------------------------------------------------------------------------------------


@functools.cache
def base_content(base: Base) -> dict[str, bytes]:
    """The files of a base as bytes by name; Kineto traces trimmed to ``base.trim`` timed events."""
    files = {}
    for name, rel in base.files:
        data = (SAMPLES / rel).read_bytes()
        if rel.endswith(".gz") and not name.endswith(".gz"):
            data = gzip.decompress(data)
        elif rel.endswith(".xz") and not name.endswith(".xz"):
            data = lzma.decompress(data)
        if base.trim and name.endswith(".json.gz"):
            data = gzip.compress(kineto_text(trim_kineto(json.loads(gzip.decompress(data)), base.trim)), mtime=0)
        files[name] = data
    return files


def trim_kineto(doc: dict[str, Any], keep: int) -> dict[str, Any]:
    """The trace with its metadata events and the events of its first ``keep`` timestamps."""
    events = doc.get("traceEvents", [])
    stamps = sorted(e["ts"] for e in events if isinstance(e.get("ts"), int | float) and e.get("ph") != "M")
    if len(stamps) <= keep:
        return doc
    cutoff = stamps[keep]
    kept = [e for e in events if e.get("ph") == "M" or not isinstance(e.get("ts"), int | float) or e["ts"] < cutoff]
    return {**doc, "traceEvents": kept}


def kineto_text(doc: Any, ensure_ascii: bool = True) -> bytes:
    """A trace as Kineto writes it: the header fields, then one event per line."""
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return _json_bytes(doc, ensure_ascii)
    dump = functools.partial(json.dumps, ensure_ascii=ensure_ascii)
    parts = []
    for key, value in doc.items():
        if key == "traceEvents":
            body = ",\n".join(dump(e) for e in value)
            parts.append(f'"traceEvents": [\n{body}\n]')
        else:
            parts.append(f"{dump(key)}: {dump(value)}")
    return ("{\n" + ",\n".join(parts) + "\n}\n").encode("utf-8", "surrogatepass")


def _json_bytes(doc: Any, ensure_ascii: bool = True) -> bytes:
    """JSON text as bytes; lone surrogates written raw when not ASCII-escaped."""
    return json.dumps(doc, ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")


# ---------------------------------------------------------------------------------------------------------------
# Byte-level mutations
# ---------------------------------------------------------------------------------------------------------------


def flip_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A few bits or bytes changed, inserted or deleted; a third of the time near the start (headers)."""
    if not data:
        return b"\x00", "empty file given one byte"
    out = bytearray(data)
    count = rng.choice((1, 1, 2, 3, 4, 8, 32))
    edits = []
    for _ in range(count):
        limit = min(len(out), 512) if rng.random() < 0.33 else len(out)
        pos = rng.randrange(max(limit, 1))
        how = rng.choice(("bit", "bit", "byte", "zero", "ff", "insert", "delete"))
        if how == "bit":
            out[pos] ^= 1 << rng.randrange(8)
        elif how == "byte":
            out[pos] = rng.randrange(256)
        elif how == "zero":
            out[pos] = 0
        elif how == "ff":
            out[pos] = 0xFF
        elif how == "insert":
            out.insert(pos, rng.randrange(256))
        elif len(out) > 1:
            del out[pos]
        edits.append(f"{how}@{pos}")
    return bytes(out), "bytes: " + ", ".join(edits[:8]) + ("..." if len(edits) > 8 else "")


def truncate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """The first part of the bytes: anywhere, or within the first 64 bytes."""
    cut = rng.randrange(min(len(data), 64)) if rng.random() < 0.2 else rng.randrange(max(len(data), 1))
    return data[:cut], f"truncated to {cut} of {len(data)} bytes"


def zero_range(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A run of 16 to 4,096 bytes set to zero."""
    length = rng.choice((16, 64, 256, 4096))
    pos = rng.randrange(max(len(data) - length, 1))
    return data[:pos] + b"\x00" * length + data[pos + length:], f"zeroed {length} bytes at {pos}"


# ---------------------------------------------------------------------------------------------------------------
# gzip
# ---------------------------------------------------------------------------------------------------------------

_FTEXT, _FHCRC, _FEXTRA, _FNAME, _FCOMMENT = 1, 2, 4, 8, 16


def gzip_member(payload: bytes, flags: int = 0, level: int = 6) -> tuple[bytes, int]:
    """One gzip member with the optional header fields in ``flags``; returns it and where the deflate data starts."""
    header = bytearray(b"\x1f\x8b\x08" + bytes([flags]) + b"\x00\x00\x00\x00\x00\xff")
    if flags & _FEXTRA:
        extra = b"AP\x04\x00fuzz" + b"\x00" * 7
        header += struct.pack("<H", len(extra)) + extra
    if flags & _FNAME:
        header += "trace-\x1b[2J-ü.json".encode("latin-1", "replace") + b"\x00"
    if flags & _FCOMMENT:
        header += b"a comment\x00"
    if flags & _FHCRC:
        header += struct.pack("<H", zlib.crc32(header) & 0xFFFF)
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
    body = compressor.compress(payload) + compressor.flush()
    trailer = struct.pack("<II", zlib.crc32(payload), len(payload) & 0xFFFFFFFF)
    return bytes(header) + body + trailer, len(header)


def mutate_gzip(kind: str, payload: bytes, rng: random.Random) -> tuple[bytes, str, bool]:
    """``payload`` gzipped and then damaged as ``kind`` says; the flag is True for a valid variant."""
    member, start = gzip_member(payload)
    body_end = len(member) - 8
    if kind == "gz-flip":
        data, note = flip_bytes(member, rng)
        return data, "gzip " + note, False
    if kind == "gz-truncate":
        data, note = truncate_bytes(member, rng)
        return data, "gzip " + note, False
    if kind == "gz-crc":
        which = rng.choice(("crc", "isize"))
        offset = body_end if which == "crc" else body_end + 4
        value = struct.unpack_from("<I", member, offset)[0] ^ (1 << rng.randrange(32))
        return member[:offset] + struct.pack("<I", value) + member[offset + 4:], f"gzip wrong {which}", False
    if kind == "gz-deflate":
        out = bytearray(member)
        if rng.random() < 0.5:
            out[start] |= 0b110  # BTYPE 11: a reserved (invalid) block type
            return bytes(out), "gzip first deflate block of reserved type 3", False
        for _ in range(rng.choice((1, 4, 16))):
            out[rng.randrange(start, max(body_end, start + 1))] = rng.randrange(256)
        return bytes(out), "gzip deflate data overwritten", False
    if kind == "gz-trailing":
        junk = rng.choice((b"\x00" * 16, b"garbage after the member", b"\x1f\x8b\x08\x00", b"\xff" * 9))
        return member + junk, f"gzip with {len(junk)} trailing bytes", False
    if kind == "gz-header":
        flags = rng.choice((_FEXTRA, _FNAME, _FCOMMENT, _FHCRC, _FEXTRA | _FNAME, _FEXTRA | _FNAME | _FCOMMENT | _FHCRC,
                            _FTEXT | _FNAME))
        data, _ = gzip_member(payload, flags=flags)
        names = [n for bit, n in ((_FTEXT, "FTEXT"), (_FHCRC, "FHCRC"), (_FEXTRA, "FEXTRA"), (_FNAME, "FNAME"),
                                  (_FCOMMENT, "FCOMMENT")) if flags & bit]
        return data, "valid gzip with header fields " + "|".join(names), True
    if kind == "gz-multi":
        cut = rng.randrange(len(payload) + 1)
        data = gzip_member(payload[:cut])[0] + gzip_member(payload[cut:])[0]
        return data, f"valid gzip in two members at {cut}", True
    raise ValueError(kind)


# ---------------------------------------------------------------------------------------------------------------
# JSON structure
# ---------------------------------------------------------------------------------------------------------------

Path_ = tuple[Any, ...]
_NAME_KEYS = ("name", "kernel", "desc", "filename", "gpu", "uuid", "host", "state", "op", "dtype", "version")


def walk(node: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every node of a parsed JSON document with its path (keys and indices), the root first."""
    stack = [(path, node)]
    while stack:
        here, value = stack.pop()
        yield here, value
        if isinstance(value, dict):
            stack.extend(((*here, k), v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend(((*here, i), v) for i, v in reversed(list(enumerate(value))))


def get_at(doc: Any, path: Path_) -> Any:
    """The node at ``path``."""
    for step in path:
        doc = doc[step]
    return doc


def set_at(doc: Any, path: Path_, value: Any) -> None:
    """Replace the node at ``path`` (not the root)."""
    get_at(doc, path[:-1])[path[-1]] = value


def pick_path(doc: Any, rng: random.Random, want: Callable[[Path_, Any], bool]) -> Path_ | None:
    """A random non-root path whose node ``want`` accepts; a third of the time one at depth 1 or 2 (headers)."""
    paths = [p for p, v in walk(doc) if p and want(p, v)]
    if not paths:
        return None
    shallow = [p for p in paths if len(p) <= 2]
    if shallow and rng.random() < 0.33:
        return rng.choice(shallow)
    return rng.choice(paths)


def siblings(doc: Any, path: Path_, rng: random.Random) -> list[Path_]:
    """``path`` and, half of the time, the same field in the other elements of its nearest enclosing list.

    Elements that carry a "cat" (Kineto events) only count as siblings when their category is the same.
    """
    index = max((i for i, step in enumerate(path) if isinstance(step, int)), default=None)
    if index is None or rng.random() < 0.5:
        return [path]
    container = get_at(doc, path[:index])
    element = container[path[index]]
    rest = path[index + 1:]
    found = []
    for i, other in enumerate(container):
        if isinstance(element, dict) and isinstance(other, dict) and other.get("cat") != element.get("cat"):
            continue
        try:
            get_at(other, rest)
        except (KeyError, IndexError, TypeError):
            continue
        found.append((*path[:index], i, *rest))
    if len(found) > 200 and rng.random() < 0.5:
        found = rng.sample(found, 200)
    return found or [path]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def wrong_type(value: Any, rng: random.Random) -> Any:
    """A value of another type than ``value``: string for number, list for dict, null, and so on."""
    if isinstance(value, dict):
        choices = [list(value.values()), [value], [], "x", None, 0]
    elif isinstance(value, list):
        choices = [{str(i): v for i, v in enumerate(value)}, {}, "x", None, 0, [value]]
    elif isinstance(value, bool):
        choices = ["true", 1, None, [], {}]
    elif _is_number(value):
        choices = [str(value), "abc", "", None, [], {}, True, [value]]
    elif isinstance(value, str):
        choices = [0, 1.5, -1, None, [], {"a": value}, True, [value]]
    else:
        choices = [0, "", [], {}, False]
    return rng.choice(choices)


class RawText:
    """Text spliced verbatim into the serialized JSON (numbers json cannot write, deep nesting)."""

    def __init__(self) -> None:
        self.pieces: list[str] = []

    def add(self, text: str) -> str:
        """A placeholder string to put in the document in place of ``text``."""
        self.pieces.append(text)
        return _PLACEHOLDER.format(len(self.pieces) - 1)

    def splice(self, data: bytes) -> bytes:
        """The serialized document with every placeholder (a JSON string) replaced by its text."""
        for i, text in enumerate(self.pieces):
            data = data.replace(f'"{_PLACEHOLDER.format(i)}"'.encode(), text.encode())
        return data


def nested(rng: random.Random) -> str:
    """``NEST_DEPTH`` levels of JSON arrays or objects."""
    if rng.random() < 0.5:
        return "[" * NEST_DEPTH + "]" * NEST_DEPTH
    return '{"a":' * NEST_DEPTH + "1" + "}" * NEST_DEPTH


def hostile_name(rng: random.Random) -> str:
    """One of the hostile names."""
    return rng.choice(HOSTILE_NAMES)


def mutate_json(kind: str, doc: Any, rng: random.Random, raw: RawText) -> str:
    """Change ``doc`` in place as ``kind`` says; returns what was done."""
    if kind == "delete":
        path = pick_path(doc, rng, lambda p, v: isinstance(p[-1], str))
        if path is None:
            return "nothing to delete"
        targets = siblings(doc, path, rng)
        for target in targets:
            del get_at(doc, target[:-1])[target[-1]]
        return f"deleted {_show(path)} ({len(targets)}x)"
    if kind == "wrongtype":
        path = pick_path(doc, rng, lambda p, v: True)
        if path is None:
            return "nothing to change"
        value = wrong_type(get_at(doc, path), rng)
        targets = siblings(doc, path, rng)
        for target in targets:
            set_at(doc, target, value)
        return f"{_show(path)} = {_short(value)} ({len(targets)}x)"
    if kind == "extreme":
        any_leaf = rng.random() < 0.1
        path = pick_path(doc, rng, lambda p, v: not isinstance(v, dict | list) if any_leaf else _is_number(v))
        if path is None:
            return "no number"
        text = None if rng.random() < 0.75 else rng.choice(NUMBER_TEXTS)
        value = rng.choice(EXTREME_NUMBERS) if text is None else raw.add(text)
        targets = siblings(doc, path, rng)
        for target in targets:
            set_at(doc, target, value)
        shown = _short(value) if text is None else f"{text[:12]}... ({len(text)} characters)"
        return f"{_show(path)} = {shown} ({len(targets)}x)"
    if kind == "deep":
        anywhere = rng.random() < 0.3
        path = pick_path(doc, rng, lambda p, v: anywhere or len(p) <= 2)
        if path is None:
            return "no field"
        set_at(doc, path, raw.add(nested(rng)))
        return f"{_show(path)} nested {NEST_DEPTH} levels"
    if kind == "hostile":
        return _hostile_json(doc, rng)
    raise ValueError(kind)


def _hostile_json(doc: Any, rng: random.Random) -> str:
    """A hostile name in place of a string (of all equal strings, half of the time), or as a key."""
    name = hostile_name(rng)
    if rng.random() < 0.15:
        path = pick_path(doc, rng, lambda p, v: isinstance(p[-1], str))
        if path is None:
            return "no key"
        parent = get_at(doc, path[:-1])
        parent[name] = parent.pop(path[-1])
        return f"key {_show(path)} renamed {name[:40]!r}"
    strings = [(p, v) for p, v in walk(doc) if p and isinstance(v, str)]
    if not strings:
        return "no string"
    named = [(p, v) for p, v in strings if isinstance(p[-1], str) and any(k in p[-1].lower() for k in _NAME_KEYS)]
    pool = named if named and rng.random() < 0.7 else strings
    first: dict[str, Path_] = {}
    for p, v in pool:  # each distinct value equally likely: a kernel's name as likely as Kineto's 'ac2g' flows
        first.setdefault(v, p)
    old = rng.choice(sorted(first))
    path = first[old]
    new = rng.choice((name, old + name, name + old))
    targets = [p for p, v in strings if v == old] if rng.random() < 0.5 else [path]
    for target in targets:
        set_at(doc, target, new)
    return f"{_show(path)} {old[:30]!r} -> {new[:40]!r} ({len(targets)}x)"


def _show(path: Path_) -> str:
    """A path for notes: keys and indices joined with dots."""
    return ".".join(str(p) for p in path)[:120]


def _short(value: Any) -> str:
    """A value for notes, at most 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------------------------------------------------------
# CSV (Nsight Compute exports)
# ---------------------------------------------------------------------------------------------------------------

_CSV_KEY_PREFIXES = ("gpu__time_duration", "launch__", "sm__throughput", "dram__", "smsp__average_warp",
                     "sm__warps_active", "device__attribute_display_name", "gpc__cycles_elapsed")
_CSV_WRONG = ("abc", "", "n/a", "(1, 2)", "1,234.5", "0x10", "[]", "{}", "true", "None", "(256, 1)", "(-1, 1, 1)",
              "(0, 0, 0)", "(2147483648, 1, 1)", "1.2.3", " 5 ")
_CSV_EXTREME = ("1e308", "-1e308", "-1", "0", "-0", "9223372036854775808", "18446744073709551616",
                "-9223372036854775809", "nan", "NaN", "inf", "-inf", "Infinity", "1e400", "1" + "0" * 400,
                "1" + "0" * 5000, "5e-324")


def _csv_rows(data: bytes) -> list[list[str]]:
    """The rows of a CSV file."""
    return list(csv.reader(io.StringIO(data.decode("utf-8"))))


def _csv_bytes(rows: Sequence[Sequence[str]]) -> bytes:
    """Rows written as ncu writes them: every field quoted."""
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return out.getvalue().encode("utf-8", "surrogatepass")


def _csv_column(rows: list[list[str]], rng: random.Random) -> int:
    """A column index: half of the time one tracedoc surely reads (identity, launch, duration, throughput)."""
    header = rows[0]
    keys = [i for i, name in enumerate(header) if i < 11 or name.startswith(_CSV_KEY_PREFIXES)]
    return rng.choice(keys) if keys and rng.random() < 0.5 else rng.randrange(len(header))


def mutate_csv(kind: str, data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """The export changed as ``kind`` says (header row 0, units row 1, one row per kernel after)."""
    if kind == "csv-encoding":
        return _csv_encoding(data, rng)
    rows = _csv_rows(data)
    if kind == "csv-structure":
        note = _csv_structure(rows, rng)
        return _csv_bytes(rows), note
    col = _csv_column(rows, rng)
    name = rows[0][col]
    data_rows = list(range(2, len(rows)))
    chosen = data_rows if rng.random() < 0.4 else [rng.choice(data_rows)] if data_rows else []
    if kind == "csv-delete":
        for row in rows:
            if col < len(row):
                del row[col]
        return _csv_bytes(rows), f"deleted column {name!r}"
    if kind in ("wrongtype", "extreme"):
        value = rng.choice(_CSV_WRONG if kind == "wrongtype" else _CSV_EXTREME)
        for r in chosen:
            rows[r][col] = value
        return _csv_bytes(rows), f"{name!r} = {value[:40]!r} in {len(chosen)} rows"
    if kind == "hostile":
        col = rows[0].index("Kernel Name") if "Kernel Name" in rows[0] and rng.random() < 0.7 else col
        name = rows[0][col]
        value = hostile_name(rng)
        for r in chosen:
            rows[r][col] = rng.choice((value, rows[r][col] + value))
        return _csv_bytes(rows), f"{name!r} hostile {value[:40]!r} in {len(chosen)} rows"
    raise ValueError(kind)


def _csv_structure(rows: list[list[str]], rng: random.Random) -> str:
    """Break the export's layout in place; returns what was done."""
    how = rng.choice(("no-units", "no-header", "header-again", "no-kernels", "short-row", "long-row", "dup-name",
                      "renamed-key", "ncu-log", "one-column"))
    if how == "no-units" and len(rows) > 1:
        del rows[1]
    elif how == "no-header":
        del rows[0]
    elif how == "header-again":
        rows.insert(rng.randrange(2, len(rows) + 1), list(rows[0]))
    elif how == "no-kernels":
        del rows[2:]
    elif how == "short-row" and len(rows) > 2:
        row = rows[rng.randrange(2, len(rows))]
        del row[rng.randrange(len(row)):]
    elif how == "long-row" and len(rows) > 2:
        rows[rng.randrange(2, len(rows))].extend(["1", "x", "(1, 1, 1)"])
    elif how == "dup-name":
        i, j = rng.randrange(len(rows[0])), rng.randrange(len(rows[0]))
        rows[0][i] = rows[0][j]
    elif how == "renamed-key":
        i = rng.randrange(min(11, len(rows[0])))
        rows[0][i] = rows[0][i] + " "
    elif how == "ncu-log":
        rows.insert(0, ["==PROF== Connected to process 4597 (/usr/bin/python3)"])
        rows.insert(rng.randrange(1, len(rows) + 1), ["==WARNING== Backing up device memory in system memory."])
    elif how == "one-column":
        for row in rows:
            del row[1:]
    return f"structure: {how}"


def _csv_encoding(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """The export in another encoding, or with bytes that are not UTF-8."""
    how = rng.choice(("bom", "utf-16", "bad-utf8", "surrogate-bytes", "crlf", "nul", "latin-1"))
    if how == "bom":
        return b"\xef\xbb\xbf" + data, "UTF-8 byte-order mark"
    if how == "utf-16":
        return data.decode("utf-8").encode("utf-16"), "UTF-16"
    if how == "crlf":
        return data.replace(b"\n", b"\r\n"), "CRLF line ends"
    if how == "latin-1":
        return data.decode("utf-8").replace("(", "\u00e9(", 3).encode("latin-1", "replace"), "latin-1 bytes in names"
    insert = {"bad-utf8": b"\xff\xfe", "surrogate-bytes": b"\xed\xa0\x80", "nul": b"\x00"}[how]
    pos = rng.randrange(len(data))
    return data[:pos] + insert + data[pos:], f"{how} at {pos}"


# ---------------------------------------------------------------------------------------------------------------
# SQLite (Nsight Systems exports)
# ---------------------------------------------------------------------------------------------------------------

_NSYS_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
                "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS", "StringIds",
                "TARGET_INFO_GPU", "TARGET_INFO_CUDA_DEVICE", "PROCESSES", "ThreadNames", "PROFILER_OVERHEAD",
                "OSRT_API", "TARGET_INFO_SESSION_START_TIME", "META_DATA_EXPORT", "META_DATA_CAPTURE",
                "CUDA_GPU_MEMORY_USAGE_EVENTS")
_SQL_VALUES: tuple[Any, ...] = (None, -1, 0, 2**63 - 1, -(2**63), 1e308, -1e308, 2**31, -(2**31) - 1, 1.5, "abc",
                                "", b"\xde\xad\xbe\xef")


def mutate_sqlite(kind: str, data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """The export changed through SQLite as ``kind`` says (on a temporary copy)."""
    with tempfile.TemporaryDirectory(prefix="tracedoc-fuzz-sql-") as tmp:
        path = Path(tmp) / "report.sqlite"
        path.write_bytes(data)
        con = sqlite3.connect(path, isolation_level=None)
        try:
            tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            present = [t for t in _NSYS_TABLES if t in tables]
            table = rng.choice(present if rng.random() < 0.85 else tables)
            note = _SQL_MUTATIONS[kind](con, table, rng)
        finally:
            con.close()
        return path.read_bytes(), note


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    """The column names of a table."""
    return [row[1] for row in con.execute(f'PRAGMA table_info("{table}")')]


def _some_rows(con: sqlite3.Connection, table: str, rng: random.Random) -> tuple[str, int]:
    """A WHERE clause choosing every row (a third of the time) or one to three random rows; and the row count."""
    rowids = [r for (r,) in con.execute(f'SELECT rowid FROM "{table}"')]
    if not rowids or rng.random() < 0.33:
        return "", len(rowids)
    chosen = rng.sample(rowids, min(len(rowids), rng.randint(1, 3)))
    return f" WHERE rowid IN ({', '.join(map(str, chosen))})", len(chosen)


def _sql_update(con: sqlite3.Connection, table: str, rng: random.Random) -> str:
    """Set one column of some rows to an extreme, negative, NULL, wrong-typed or hostile value (or swap start/end)."""
    columns = _columns(con, table)
    where, count = _some_rows(con, table, rng)
    if {"start", "end"} <= set(columns) and rng.random() < 0.15:
        con.execute(f'UPDATE "{table}" SET start = "end", "end" = start{where}')
        return f"{table}: start and end swapped in {count} rows"
    column = rng.choice(columns)
    if rng.random() < 0.1:
        value, sql = hostile_name(rng), f'UPDATE "{table}" SET "{column}" = CAST(? AS TEXT){where}'
    else:
        value, sql = rng.choice(_SQL_VALUES), f'UPDATE "{table}" SET "{column}" = ?{where}'
    bound = _sql_text(value) if isinstance(value, str) else value
    try:
        con.execute(sql, (bound,))
    except sqlite3.IntegrityError:  # NOT NULL, UNIQUE: the same table without its constraints takes the value
        _drop_constraints(con, table)
        con.execute(sql, (bound,))
    return f"{table}.{column} = {_short(value)} in {count} rows"


def _drop_constraints(con: sqlite3.Connection, table: str) -> None:
    """Rebuild a table as a plain copy of its rows (no keys, NOT NULL or UNIQUE)."""
    con.executescript(f'CREATE TABLE _fuzz AS SELECT * FROM "{table}"; DROP TABLE "{table}"; '
                      f'ALTER TABLE _fuzz RENAME TO "{table}";')


def _sql_text(text: str) -> str | bytes:
    """A string to bind as SQLite TEXT; one with a lone surrogate as its bytes (invalid UTF-8, CAST to TEXT)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
    return text


def _sql_drop(con: sqlite3.Connection, table: str, rng: random.Random) -> str:
    """Drop the table, one of its columns, or rename a column."""
    columns = _columns(con, table)
    how = rng.choice(("table", "column", "rename"))
    if how == "table" or len(columns) < 2:
        con.execute(f'DROP TABLE "{table}"')
        return f"dropped table {table}"
    column = rng.choice(columns)
    if how == "column":
        try:
            con.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
        except sqlite3.OperationalError:  # a key or indexed column: rebuild the table, then drop it
            _drop_constraints(con, table)
            con.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
        return f"dropped column {table}.{column}"
    con.execute(f'ALTER TABLE "{table}" RENAME COLUMN "{column}" TO "{column}_x"')
    return f"renamed column {table}.{column}"


def _sql_delete(con: sqlite3.Connection, table: str, rng: random.Random) -> str:
    """Delete every row of the table, or a few."""
    where, count = _some_rows(con, table, rng)
    con.execute(f'DELETE FROM "{table}"{where}')
    return f"deleted {count} rows of {table}"


def _sql_hostile(con: sqlite3.Connection, table: str, rng: random.Random) -> str:
    """A hostile name for the busiest kernel, an NVTX range, a thread, the GPU, or any string; or a name of 4 or 16
    MiB for the kernels (each kernel row gets a copy: one of 10 MB took an 11.5 MB export to 7.8 GB)."""
    name = hostile_name(rng)
    targets = {
        "kernel": "SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1 ORDER BY sum(\"end\" - start) DESC",
        "demangled": "SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1 ORDER BY count(*) DESC",
        "nvtx": "SELECT textId FROM NVTX_EVENTS WHERE textId IS NOT NULL GROUP BY 1 ORDER BY count(*) DESC",
        "thread": "SELECT nameId FROM ThreadNames",
        "api": "SELECT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY 1 ORDER BY count(*) DESC",
        "any": "SELECT id FROM StringIds",
    }
    what = rng.choice((*targets, "nvtx-text", "gpu-name", "huge"))
    try:
        if what == "huge":
            name = "k" * rng.choice((4 << 20, 16 << 20))
            con.execute("UPDATE StringIds SET value = ? WHERE id IN (SELECT demangledName FROM "
                        "CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1 ORDER BY count(*) DESC LIMIT 2)", (name,))
        elif what == "nvtx-text":
            con.execute("UPDATE NVTX_EVENTS SET text = CAST(? AS TEXT) WHERE text IS NOT NULL", (_sql_text(name),))
        elif what == "gpu-name":
            con.execute("UPDATE TARGET_INFO_GPU SET name = CAST(? AS TEXT)", (_sql_text(name),))
        else:
            ids = [r for (r,) in con.execute(targets[what]).fetchmany(rng.choice((1, 1, 3))) if isinstance(r, int)]
            value = "CAST(? AS TEXT) || value" if rng.random() < 0.3 else "CAST(? AS TEXT)"
            con.execute(f"UPDATE StringIds SET value = {value} WHERE id IN ({', '.join(map(str, ids)) or 'NULL'})",
                        (_sql_text(name),))
    except sqlite3.OperationalError as exc:  # the export lacks that table or column
        return f"hostile {what}: {exc}"
    return f"hostile {what} name {name[:40]!r}"


_SQL_MUTATIONS: dict[str, Callable[[sqlite3.Connection, str, random.Random], str]] = {
    "sql-update": _sql_update, "sql-drop": _sql_drop, "sql-delete": _sql_delete, "sql-hostile": _sql_hostile}


# ---------------------------------------------------------------------------------------------------------------
# Pickle (flight-recorder dumps), at the opcode level only
# ---------------------------------------------------------------------------------------------------------------

_PICKLE_SCALARS = {"BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "BININT", "BININT1", "BININT2", "LONG1", "LONG4",
                   "BINFLOAT", "NONE", "NEWTRUE", "NEWFALSE", "BINGET", "LONG_BINGET", "BINBYTES", "SHORT_BINBYTES"}


def pickle_segments(data: bytes) -> list[tuple[str, bytes]]:
    """The pickle cut into its opcodes (name, bytes with arguments), read with pickletools (nothing is run)."""
    ops = list(pickletools.genops(data))
    ends = [pos for _, _, pos in ops[1:]] + [len(data)]
    return [(op.name, data[pos:end]) for (op, _, pos), end in zip(ops, ends)]


def encode_pickle_value(value: Any) -> bytes:
    """Opcodes that push ``value`` (None, bool, int, float, str, bytes, lists and dicts of those), with no memo."""
    if value is None:
        return b"N"
    if value is True or value is False:
        return b"\x88" if value else b"\x89"
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return b"J" + struct.pack("<i", value)
        encoded = pickle.encode_long(value)
        return (b"\x8a" + bytes([len(encoded)]) if len(encoded) < 256 else b"\x8b" + struct.pack("<i", len(encoded))) \
            + encoded
    if isinstance(value, float):
        return b"G" + struct.pack(">d", value)
    if isinstance(value, str):
        encoded = value.encode("utf-8", "surrogatepass")
        return b"X" + struct.pack("<I", len(encoded)) + encoded
    if isinstance(value, bytes):
        return b"C" + bytes([len(value)]) + value
    if isinstance(value, list):
        return b"](" + b"".join(encode_pickle_value(v) for v in value) + b"e"
    if isinstance(value, dict):
        return b"}(" + b"".join(encode_pickle_value(k) + encode_pickle_value(v) for k, v in value.items()) + b"u"
    raise TypeError(type(value))


def mutate_pickle(kind: str, data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """The dump's opcodes changed as ``kind`` says."""
    segments = pickle_segments(data)
    inner = [i for i, (name, _) in enumerate(segments) if name not in ("PROTO", "STOP")]
    scalars = [i for i, (name, _) in enumerate(segments) if name in _PICKLE_SCALARS]
    if kind == "pk-drop":
        i = rng.choice(inner)
        note = f"dropped opcode {i} {segments[i][0]}"
        del segments[i]
    elif kind == "pk-dup":
        i = rng.choice(inner)
        segments.insert(i, segments[i])
        note = f"repeated opcode {i} {segments[i][0]}"
    elif kind == "pk-value":
        i = rng.choice(scalars)
        value = _pickle_replacement(segments[i], rng)
        note = f"opcode {i} {segments[i][0]} -> {_short(value)}"
        segments[i] = ("VALUE", encode_pickle_value(value))
    elif kind == "pk-nest":
        i = rng.choice(scalars)
        segments[i] = ("NEST", b"]" * NEST_DEPTH + b"a" * (NEST_DEPTH - 1))
        note = f"opcode {i} -> lists nested {NEST_DEPTH} levels"
    elif kind == "pk-global":
        i = rng.choice(scalars)
        call = encode_pickle_value(EXECUTED_MARKER) + b"\x85R"  # TUPLE1, REDUCE: print(marker)
        how = rng.choice(("GLOBAL", "STACK_GLOBAL"))
        head = b"cbuiltins\nprint\n" if how == "GLOBAL" else b"\x8c\x08builtins\x8c\x05print\x93"
        segments[i] = ("GLOBAL", head + call)
        note = f"opcode {i} -> {how} builtins.print called by REDUCE"
    elif kind == "pk-memo":
        gets = [i for i, (name, _) in enumerate(segments) if name in ("BINGET", "BINPUT")] or scalars
        i = rng.choice(gets)
        index = rng.choice((255, 200))
        segments[i] = ("MEMO", (b"h" if rng.random() < 0.7 else b"q") + bytes([index]))
        note = f"opcode {i} -> memo op on index {index}"
    else:
        raise ValueError(kind)
    return b"".join(raw for _, raw in segments), note


def _pickle_replacement(segment: tuple[str, bytes], rng: random.Random) -> Any:
    """An extreme, wrong-typed or hostile value in place of a pickled scalar."""
    name = segment[0]
    roll = rng.random()
    if roll < 0.35:
        return rng.choice(EXTREME_NUMBERS + (10**400, -(10**400)))
    if roll < 0.6 and "UNICODE" in name:
        return rng.choice((hostile_name(rng), "x" * 70000))
    return rng.choice(("abc", "", None, True, [], {}, [1, 2], {"a": 1}, b"\x00\xff", 3.5, [["x"]], {"0": {"1": []}}))


# ---------------------------------------------------------------------------------------------------------------
# Parquet (telemetry)
# ---------------------------------------------------------------------------------------------------------------


def _parquet(table: pa.Table) -> bytes:
    """A table written as Parquet, with its schema metadata."""
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _replace_column(table: pa.Table, index: int, array: pa.Array, name: str | None = None) -> pa.Table:
    """The table with one column replaced, its schema metadata kept."""
    meta = table.schema.metadata
    out = table.set_column(index, name or table.column_names[index], array)
    return out.replace_schema_metadata(meta)


def mutate_parquet(kind: str, data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """The telemetry table changed as ``kind`` says."""
    table = pq.read_table(io.BytesIO(data))
    n = table.num_rows
    index = rng.randrange(table.num_columns)
    name = table.column_names[index]
    column = table.column(index)
    rows = set(range(n)) if rng.random() < 0.4 else {rng.randrange(n)} if n else set()
    if kind == "pq-extreme":
        numeric = [i for i, f in enumerate(table.schema) if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)]
        index = rng.choice(numeric)
        name, column = table.column_names[index], table.column(index)
        if pa.types.is_integer(column.type):
            value = rng.choice((2**63 - 1, -(2**63), -1, 0, None, 2**31))
        else:
            value = rng.choice((math.nan, math.inf, -math.inf, 1e308, -1.0, 0.0, None))
        values = [value if i in rows else v for i, v in enumerate(column.to_pylist())]
        table = _replace_column(table, index, pa.array(values, type=column.type))
        return _parquet(table), f"{name} = {value!r} in {len(rows)} rows"
    if kind == "pq-wrongtype":
        how = rng.choice(("string", "float", "null", "list", "bool"))
        values = column.to_pylist()
        array = {"string": lambda: pa.array([rng.choice(("abc", "", "12")) for _ in values]),
                 "float": lambda: pa.array([1.5] * n, type=pa.float64()),
                 "null": lambda: pa.nulls(n),
                 "list": lambda: pa.array([[1, 2]] * n),
                 "bool": lambda: pa.array([True] * n)}[how]()
        return _parquet(_replace_column(table, index, array)), f"{name} as {how}"
    if kind == "pq-drop":
        if rng.random() < 0.6:
            table = table.remove_column(index)
            return _parquet(table), f"dropped column {name}"
        return _parquet(_replace_column(table, index, column, name + "_x")), f"renamed column {name}"
    if kind == "pq-hostile":
        strings = [i for i, f in enumerate(table.schema) if pa.types.is_string(f.type)]
        hostile = hostile_name(rng)
        if not strings or rng.random() < 0.3:
            meta = dict(table.schema.metadata or {})
            meta[b"hostname"] = hostile.encode("utf-8", "surrogatepass")
            return _parquet(table.replace_schema_metadata(meta)), f"hostname {hostile[:40]!r}"
        index = rng.choice(strings)
        values = [hostile if i in rows else v for i, v in enumerate(table.column(index).to_pylist())]
        array = pa.array([v.encode("utf-8", "surrogatepass") if isinstance(v, str) else v for v in values],
                         type=pa.binary()).cast(pa.string(), safe=False) if "\ud800" in hostile else pa.array(values)
        return _parquet(_replace_column(table, index, array)), f"{table.column_names[index]} {hostile[:40]!r}"
    if kind == "pq-meta":
        return _parquet_meta(table, rng)
    if kind == "pq-empty":
        how = rng.choice(("no-rows", "one-row", "reversed", "repeated"))
        if how == "no-rows":
            table = table.slice(0, 0)
        elif how == "one-row":
            table = table.slice(0, 1)
        elif how == "reversed":
            table = table.take(pa.array(list(reversed(range(n)))))
        else:
            table = pa.concat_tables([table, table])
        return _parquet(table), f"rows: {how}"
    raise ValueError(kind)


def _parquet_meta(table: pa.Table, rng: random.Random) -> tuple[bytes, str]:
    """The telemetry's schema metadata damaged: a key removed or given a bad value."""
    meta = dict(table.schema.metadata or {})
    key = rng.choice(sorted(meta) or [b"interval_s"])
    if rng.random() < 0.3:
        meta.pop(key, None)
        note = f"metadata {key.decode()} removed"
    else:
        value = rng.choice((b"abc", b"0", b"-1", b"nan", b"inf", b"1e308", b"", b"2", b"\xff\xfe", b"{}"))
        meta[key] = value
        note = f"metadata {key.decode()} = {value!r}"
    return _parquet(table.replace_schema_metadata(meta)), note


# ---------------------------------------------------------------------------------------------------------------
# Building a mutant
# ---------------------------------------------------------------------------------------------------------------


def choose_base(mid: MutantId, rng: random.Random) -> Base:
    """The base a mutant starts from (among those its kind applies to)."""
    bases = [b for b in FORMATS[mid.fmt].bases if b.codec in _KIND_CODECS.get(mid.kind, {b.codec})]
    return rng.choice(bases)


def mutate(mid: MutantId, base: Base, data: bytes, rng: random.Random) -> tuple[bytes, str, bool]:
    """The target's bytes after the mutation ``mid.kind``, what was done, and whether the result is still valid."""
    kind, codec = mid.kind, base.codec
    unpack, pack = _codec_layers(codec)
    plain = unpack(data)
    if kind.startswith("gz-"):
        return mutate_gzip(kind, plain, rng)
    if kind.startswith("xz-"):
        fn = flip_bytes if kind == "xz-flip" else truncate_bytes
        out, note = fn(data, rng)
        return out, "xz " + note, False
    if kind in ("flip", "truncate", "zero-range"):
        fn = {"flip": flip_bytes, "truncate": truncate_bytes, "zero-range": zero_range}[kind]
        out, note = fn(plain, rng)
        return pack(out), note, False
    if codec in ("json", "kineto"):
        return _mutate_json_bytes(kind, codec, plain, pack, rng)
    if codec == "csv":
        out, note = mutate_csv(kind, plain, rng)
    elif codec == "sqlite":
        out, note = mutate_sqlite(kind, plain, rng)
    elif codec == "pickle":
        out, note = mutate_pickle(kind, plain, rng)
    elif codec == "parquet":
        out, note = mutate_parquet(kind, plain, rng)
    else:
        raise ValueError(f"{kind} does not apply to {codec}")
    return pack(out), note, False


def _mutate_json_bytes(kind: str, codec: str, plain: bytes, pack: Callable[[bytes], bytes],
                       rng: random.Random) -> tuple[bytes, str, bool]:
    """A JSON document parsed, changed and written again (one Kineto event per line; ASCII-escaped or not)."""
    doc = json.loads(plain)
    raw = RawText()
    note = mutate_json(kind, doc, rng, raw)
    ensure_ascii = rng.random() < 0.7
    text = kineto_text(doc, ensure_ascii) if codec == "kineto" else _json_bytes(doc, ensure_ascii)
    return pack(raw.splice(text)), note + ("" if ensure_ascii else " (raw UTF-8)"), False


def _codec_layers(codec: str) -> tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]:
    """How to unwrap a target's bytes to the structured content and wrap them again (gzip, xz, or nothing)."""
    if codec == "kineto":
        return gzip.decompress, lambda b: gzip.compress(b, compresslevel=6, mtime=0)
    if codec == "xz":
        return lzma.decompress, lambda b: lzma.compress(b, preset=0)
    return (lambda b: b), (lambda b: b)


def build_mutant(mid: MutantId, directory: Path) -> Mutant:
    """Write the mutant ``mid`` under ``directory`` (the same bytes for the same id, every time)."""
    rng = random.Random(str(mid))
    base = choose_base(mid, rng)
    files = dict(base_content(base))
    data, note, valid = mutate(mid, base, files[base.target], rng)
    files[base.target] = data
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (directory / name).write_bytes(content)
    path = directory / base.target if base.single else directory
    return Mutant(mid, path, base.name, note, expect_ok=valid)


def plan(count: int, seed: int, formats: Sequence[str] | None = None, kinds: Sequence[str] | None = None
         ) -> list[MutantId]:
    """``count`` mutant ids: the formats in turn, each format's kinds in turn (in an order drawn from ``seed``)."""
    rng = random.Random(seed)
    names = list(formats or FORMATS)
    unknown = [n for n in names if n not in FORMATS]
    if unknown:
        raise ValueError(f"unknown formats {unknown} (known: {', '.join(FORMATS)})")
    order = {}
    for name in names:
        allowed = [k for k in FORMATS[name].kinds if kinds is None or k in kinds]
        order[name] = rng.sample(allowed, len(allowed))
    names = [n for n in names if order[n]]
    ids = []
    for i in range(count if names else 0):
        fmt = names[i % len(names)]
        kind = order[fmt][(i // len(names)) % len(order[fmt])]
        ids.append(MutantId(fmt, kind, rng.randrange(1 << 31)))
    return ids


# ---------------------------------------------------------------------------------------------------------------
# Running tracedoc on a mutant
# ---------------------------------------------------------------------------------------------------------------

FAILURES = ("code-execution", "timeout", "rss", "crash", "traceback", "exit-code", "stderr-lines", "stderr-control",
            "leaked-traceback", "control-chars", "md-injection", "bad-json")
_TRACEBACK = "Traceback (most recent call last)"
# A traceback as Python or Rich prints it: the header at the start of a line (Rich draws a box around it).
_TRACEBACK_LINE = re.compile(r"^[\s\u2500-\u257f]*Traceback \(most recent call last\)", re.M)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_FRAME = re.compile(r'File "([^"]+)", line (\d+),? in (\S+)')
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Overflow))\b:?(.*)$")
_STREAM_LIMIT = 4 << 20


@dataclass
class Outcome:
    """What one run of tracedoc on a mutant did, and how it is judged."""

    id: MutantId
    base: str
    note: str
    exit_code: int
    seconds: float
    peak_rss_mb: float
    stdout: str
    stderr: str
    status: str = "ok"  # ok | bad-input | rejected-valid | harness-error | one of FAILURES
    problems: list[str] = field(default_factory=list)
    signature: str = ""  # where a failure comes from: tracedoc file:function and exception type
    debug_stderr: str = ""

    @property
    def failed(self) -> bool:
        """True when the run broke the contract."""
        return self.status in FAILURES

    def stderr_lines(self) -> list[str]:
        """The non-empty lines on stderr."""
        return [line for line in self.stderr.splitlines() if line.strip()]


def command(path: Path, output: str) -> list[str]:
    """The command line under test."""
    return [sys.executable, "-m", "tracedoc", "analyze", str(path), "--no-cache", "--format", output]


def child_env(root: Path, scratch: Path, debug: bool = False) -> dict[str, str]:
    """The environment of a run: tracedoc from ``root``, a private cache and TMPDIR, no forced colours."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRACEDOC_DEBUG", "FORCE_COLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE", "PYTHONSTARTUP")}
    (scratch / "cache").mkdir(parents=True, exist_ok=True)
    (scratch / "tmp").mkdir(parents=True, exist_ok=True)
    env.update(PYTHONPATH=str(root), TRACEDOC_CACHE_DIR=str(scratch / "cache"), TMPDIR=str(scratch / "tmp"),
               PYTHONFAULTHANDLER="1", COLUMNS="100")
    if debug:
        env["TRACEDOC_DEBUG"] = "1"
    return env


def _rss_mb(pid: int) -> float:
    """The current resident memory of a process in MB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _address_space_limit(limit_mb: int | None) -> Callable[[], None] | None:
    """A preexec function capping the address space (off by default: DuckDB reserves virtual memory freely)."""
    if not limit_mb:
        return None

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))

    return limit


def execute(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = TIMEOUT_S,
            kill_rss_mb: float = RSS_KILL_MB, address_space_mb: int | None = None, nice: int = 10
            ) -> tuple[int, float, float, str, str, str]:
    """Run ``argv``; returns exit code (negative: signal), seconds, peak RSS MB, stdout, stderr and a kill reason.

    A run past ``timeout`` or ``kill_rss_mb`` is sent SIGABRT first (faulthandler then prints where it was),
    then SIGKILL two seconds later. Peak RSS comes from the kernel's accounting of the reaped child (wait4).
    """
    if nice and shutil.which("nice"):
        argv = ["nice", "-n", str(nice), *argv]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=cwd, env=env,
                                start_new_session=True, preexec_fn=_address_space_limit(address_space_mb))
        killed, aborted_at, delay = "", 0.0, 0.02
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            now = time.monotonic()
            if not killed:
                killed = "timeout" if now - start > timeout else "rss" if _rss_mb(proc.pid) > kill_rss_mb else ""
                if killed:
                    _signal_group(proc.pid, signal.SIGABRT)
                    aborted_at = now
            elif now - aborted_at > 2:
                _signal_group(proc.pid, signal.SIGKILL)
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - start
        return proc.returncode, seconds, usage.ru_maxrss / 1024, _read_stream(out), _read_stream(err), killed


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Send a signal to the run's process group, if it is still there."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def _read_stream(f: Any) -> str:
    """What a run wrote to one stream (the first 4 MiB), decoded without failing on bad UTF-8."""
    f.seek(0)
    data = f.read(_STREAM_LIMIT)
    return data.decode("utf-8", "surrogateescape")


def run_mutant(mutant: Mutant, root: Path = ROOT, scratch: Path | None = None, timeout: float = TIMEOUT_S,
               address_space_mb: int | None = None, nice: int = 10) -> Outcome:
    """Analyse one mutant with tracedoc (from ``root``) in a subprocess and judge the result."""
    with tempfile.TemporaryDirectory(prefix="tracedoc-fuzz-run-", dir=scratch) as tmp:
        env = child_env(root, Path(tmp))
        code, seconds, rss, out, err, killed = execute(command(mutant.path, mutant.id.output), env, Path(tmp),
                                                       timeout=timeout, address_space_mb=address_space_mb, nice=nice)
    outcome = Outcome(mutant.id, mutant.base, mutant.note, code, seconds, rss, out, err)
    judge(outcome, killed, mutant.expect_ok)
    return outcome


def judge(outcome: Outcome, killed: str, expect_ok: bool) -> None:
    """Set ``status`` (the first problem found), every problem, and the failure's signature."""
    problems = []
    code, out, err, output = outcome.exit_code, outcome.stdout, outcome.stderr, outcome.id.output
    if EXECUTED_MARKER in out or EXECUTED_MARKER in err:
        problems.append("code-execution")
    if killed:
        problems.append(killed)
    if code < 0 and not killed:
        problems.append("crash")
    if _TRACEBACK_LINE.search(out) or _TRACEBACK_LINE.search(err) or "Fatal Python error" in err:
        problems.append("traceback")
    elif _TRACEBACK in out or _TRACEBACK in err:
        problems.append("leaked-traceback")  # an error message quoting a traceback's header
    if code not in (0, 2) and not killed and code >= 0:
        problems.append("exit-code")
    if outcome.peak_rss_mb > RSS_LIMIT_MB and "rss" not in problems:
        problems.append("rss")
    if code == 2:
        problems += _judge_error_line(err)
    if code == 0:
        problems += _judge_report(out, output)
    outcome.problems = problems
    if problems:
        outcome.status = problems[0]
    elif code == 2:
        outcome.status = "rejected-valid" if expect_ok else "bad-input"
    outcome.signature = signature(outcome) if problems else ""


def _judge_error_line(err: str) -> list[str]:
    """Exit 2 must say why in exactly one line on stderr, with no control characters."""
    problems = []
    if len([line for line in err.splitlines() if line.strip()]) != 1 or not err.endswith("\n") or \
            err.count("\n") != 1 or "\r" in err:
        problems.append("stderr-lines")
    if _CONTROL.search(err.rstrip("\n")):
        problems.append("stderr-control")
    return problems


def _judge_report(out: str, output: str) -> list[str]:
    """The report: no raw control characters (text, md), no injected Markdown heading (md), valid JSON (json)."""
    problems = []
    if output in ("text", "md") and _CONTROL.search(out.replace("\n", "").replace("\t", "")):
        problems.append("control-chars")
    if output == "md" and re.search(r"^# injected heading", out, re.M):
        problems.append("md-injection")
    if output == "json":
        try:
            json.loads(out, parse_constant=_reject_constant)
        except ValueError:
            problems.append("bad-json")
    return problems


def _reject_constant(name: str) -> Any:
    """NaN and Infinity are not JSON."""
    raise ValueError(f"{name} is not JSON")


def signature(outcome: Outcome) -> str:
    """Where a failure comes from: ``status: tracedoc/file.py:function: ExceptionType`` (or the error line)."""
    text = outcome.debug_stderr or outcome.stderr
    if not _has_stack(text) and _has_stack(outcome.stdout):
        text = outcome.stdout
    if _has_stack(text):
        frames = tracedoc_frames(text)
        where = frames[-1].rsplit(":", 1)[0] if frames else "?"
        return f"{outcome.status}: {where}: {exception_type(text) or '?'}"
    if outcome.status == "control-chars":
        found = sorted({repr(c) for c in _CONTROL.findall(outcome.stdout.replace("\n", "").replace("\t", ""))})
        return f"control-chars: {outcome.id.output} report carries {' '.join(found[:6])}"
    if outcome.status == "bad-json":
        try:
            json.loads(outcome.stdout, parse_constant=_reject_constant)
        except ValueError as exc:
            return f"bad-json: {_normalize(str(exc))}"
    if outcome.status in ("rss", "timeout"):
        return f"{outcome.status}: no stack"
    lines = outcome.stderr_lines()
    return f"{outcome.status}: {_normalize(lines[0]) if lines else '(no stderr)'}"


def _has_stack(text: str) -> bool:
    """True when ``text`` holds a Python traceback or a faulthandler stack dump."""
    return bool(_TRACEBACK_LINE.search(text)) or "Fatal Python error" in text


def _frames(text: str) -> list[tuple[str, str, str]]:
    """The (file, line, function) frames of a traceback, the innermost last (stack dumps are reversed)."""
    frames = _FRAME.findall(text)
    if "Fatal Python error" in text and _TRACEBACK not in text:
        # faulthandler prints the innermost frame first; keep the first thread's stack (the one that was running)
        first = text.split("\n\n")[0] if "Current thread" in text else text
        frames = list(reversed(_FRAME.findall(first) or frames))
    return frames


def tracedoc_frames(text: str) -> list[str]:
    """The tracedoc frames of a traceback as ``tracedoc/x.py:function:line``, innermost last."""
    found = []
    for path, line, func in _frames(text):
        if "/tracedoc/" in path and "site-packages" not in path:
            found.append(f"{path[path.rindex('/tracedoc/') + 1:]}:{func}:{line}")
    if not found and _frames(text):
        path, line, func = _frames(text)[-1]
        found.append(f"{Path(path).name}:{func}:{line}")
    return found


def exception_type(text: str) -> str:
    """The type of the last exception in a traceback (the line after its last frame), or the fatal error."""
    lines = text.splitlines()
    last = max((i for i, line in enumerate(lines) if _FRAME.search(line)), default=-1)
    if _TRACEBACK in text:
        for line in lines[last + 1:]:
            if line.strip() and not line.startswith((" ", "\t")):
                return line.split(":", 1)[0].strip()[:80]
    fatal = [line for line in lines if line.startswith("Fatal Python error")]
    if fatal:
        return fatal[-1].split(":", 1)[-1].strip()[:80]
    matches = [m.group(1) for m in map(_EXCEPTION.match, (line.strip() for line in lines)) if m]
    return matches[-1] if matches else ""


def _normalize(line: str) -> str:
    """An error line with paths and numbers generalized, to group failures."""
    line = re.sub(r"/\S+", "PATH", line)
    line = re.sub(r"\d+", "N", line)
    return line[:160]


def explain(mutant: Mutant, outcome: Outcome, root: Path = ROOT, scratch: Path | None = None) -> None:
    """Run a failing mutant again with TRACEDOC_DEBUG=1 to see the traceback behind a one-line error."""
    if _has_stack(outcome.stderr) or outcome.status in ("timeout", "rss", "crash"):
        return
    with tempfile.TemporaryDirectory(prefix="tracedoc-fuzz-run-", dir=scratch) as tmp:
        env = child_env(root, Path(tmp), debug=True)
        *_, err, _ = execute(command(mutant.path, mutant.id.output), env, Path(tmp))
    outcome.debug_stderr = err
    outcome.signature = signature(outcome)


# ---------------------------------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------------------------------


def snapshot(revision: str, dest: Path) -> Path:
    """Extract tracedoc and its rules as of a git revision of this checkout under ``dest``; returns that root.

    Fuzzing a fixed version (``run_one(..., root=...)``) keeps a batch's results comparable while the working
    tree changes under it.
    """
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "tracedoc", "rules"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    rules = dest / "tracedoc" / "builtin_rules"  # installed as tracedoc.builtin_rules (pyproject's package-dir)
    if not rules.exists():
        rules.symlink_to(Path("..") / "rules")
    return dest


def run_one(mid: MutantId, root: Path = ROOT, keep: Path | None = None, timeout: float = TIMEOUT_S,
            address_space_mb: int | None = None, debug_failures: bool = True) -> Outcome:
    """Build, run and judge one mutant; a failing one is copied under ``keep`` with a note on reproducing it."""
    with tempfile.TemporaryDirectory(prefix="tracedoc-fuzz-") as tmp:
        try:
            mutant = build_mutant(mid, Path(tmp) / "input")
        except Exception as exc:  # a bug of the fuzzer, not of tracedoc: reported, and fails the CI test
            return Outcome(mid, "?", f"building the mutant failed: {exc!r}", -1, 0.0, 0.0, "", "",
                           status="harness-error", signature=f"harness-error: {type(exc).__name__}: {exc}"[:200])
        outcome = run_mutant(mutant, root, Path(tmp), timeout=timeout, address_space_mb=address_space_mb)
        if outcome.failed and debug_failures:
            explain(mutant, outcome, root, Path(tmp))
        if outcome.failed and keep is not None:
            save_failure(mutant, outcome, keep)
        return outcome


def save_failure(mutant: Mutant, outcome: Outcome, keep: Path) -> Path:
    """Copy a failing mutant to ``keep/<id>/`` with README.txt (how to reproduce, what happened)."""
    dest = keep / str(outcome.id).replace("/", "_")
    if dest.exists():
        shutil.rmtree(dest)
    source = mutant.path if mutant.path.is_dir() else mutant.path.parent
    shutil.copytree(source, dest)
    target = dest / mutant.path.name if mutant.path.is_file() else dest
    lines = [
        f"mutant: {outcome.id}  (base {outcome.base}: {outcome.note})",
        f"status: {outcome.status}  problems: {', '.join(outcome.problems)}  exit code: {outcome.exit_code}",
        f"signature: {outcome.signature}",
        f"seconds: {outcome.seconds:.1f}  peak RSS: {outcome.peak_rss_mb:.0f} MB",
        "",
        "reproduce:",
        f"  python benchmarks/fuzz.py --repro {outcome.id}",
        f"  tracedoc analyze {target} --no-cache --format {outcome.id.output}",
        "",
        "stderr:",
        outcome.stderr[-6000:],
    ]
    if outcome.debug_stderr:
        lines += ["", "stderr with TRACEDOC_DEBUG=1:", outcome.debug_stderr[-8000:]]
    (dest / "README.txt").write_text("\n".join(lines), errors="backslashreplace")
    return dest


def run_batch(ids: Iterable[MutantId], jobs: int = 1, root: Path = ROOT, keep: Path | None = None,
              timeout: float = TIMEOUT_S, progress: Callable[[Outcome, int, int], None] | None = None,
              address_space_mb: int | None = None) -> list[Outcome]:
    """Run mutants on ``jobs`` workers (each drives one tracedoc subprocess); outcomes in the order of ``ids``."""
    ids = list(ids)
    done = [0]
    lock = threading.Lock()

    def task(mid: MutantId) -> Outcome:
        outcome = run_one(mid, root, keep, timeout, address_space_mb)
        with lock:
            done[0] += 1
            if progress:
                progress(outcome, done[0], len(ids))
        return outcome

    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        return list(pool.map(task, ids))


def summary_table(outcomes: Sequence[Outcome]) -> str:
    """Counts per input format (rows) and status (columns)."""
    statuses = ["ok", "bad-input", "rejected-valid"] + [s for s in (*FAILURES, "harness-error")
                                                        if any(o.status == s for o in outcomes)]
    counts = Counter((o.id.fmt, o.status) for o in outcomes)
    formats = [f for f in FORMATS if any(o.id.fmt == f for o in outcomes)]
    widths = [max(12, *(len(f) for f in formats))] + [max(len(s), 5) for s in statuses] + [5]
    rows = [["format", *statuses, "total"]]
    for fmt in formats:
        rows.append([fmt, *(str(counts[fmt, s]) for s in statuses), str(sum(counts[fmt, s] for s in statuses))])
    rows.append(["all", *(str(sum(counts[f, s] for f in formats)) for s in statuses), str(len(outcomes))])
    return "\n".join("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                               enumerate(zip(row, widths))) for row in rows)


def failure_report(outcomes: Sequence[Outcome]) -> str:
    """Each failure (id, status, exit code, first and last stderr lines), then the failures grouped by signature."""
    failures = [o for o in outcomes if o.failed or o.status == "harness-error"]
    if not failures:
        return "no failures"
    lines = [f"{len(failures)} failure(s):"]
    for o in failures:
        err = o.stderr_lines()
        lines.append(f"  {o.id}  [{o.status}] exit {o.exit_code}, {o.seconds:.1f} s, {o.peak_rss_mb:.0f} MB  "
                     f"({o.base}: {o.note[:100]!r})")
        if err:
            lines.append(f"      stderr first: {err[0][:200]!r}")
            if len(err) > 1:
                lines.append(f"      stderr last:  {err[-1][:200]!r}")
        lines.append(f"      cause: {o.signature}")
        frames = tracedoc_frames(o.debug_stderr or o.stderr)
        if frames:
            lines.append(f"      frames: {' <- '.join(reversed(frames[-3:]))}")
    lines.append("")
    lines.append("by cause:")
    groups: dict[str, list[Outcome]] = {}
    for o in failures:
        groups.setdefault(o.signature, []).append(o)
    for sig, members in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        formats = sorted({m.id.fmt for m in members})
        lines.append(f"  {len(members):4d}  {sig}")
        lines.append(f"        formats {', '.join(formats)}; e.g. {members[0].id}")
    return "\n".join(lines)

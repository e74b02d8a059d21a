"""Hostile and broken inputs of every format: one line on stderr and exit code 2, never a traceback or a hang.

Each case is an edited copy of a real sample (its docstring says what was changed), run through the command line
as a user would. The conveniences that share the same code (xz, standard input, gzip header fields) are checked to
read real samples the same as before.
"""

from __future__ import annotations

import csv
import gc
import gzip
import io
import json
import lzma
import os
import re
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import ROOT, SAMPLES
from tracedoc.cli import cli
from tracedoc.errors import InputError, TracedocError, first_line
from tracedoc.ingest import compressed
from tracedoc.ingest.ncu import ncu_csv
from tracedoc.limits import Limits

KINETO = SAMPLES / "decode-compile" / "trace.json.gz"  # one rank, 60 KB
EAGER = SAMPLES / "decode-eager" / "trace.json.gz"  # 632 KB, 9.5 MB unpacked: more than the sniffed first MiB
STRAGGLER_RANK1 = SAMPLES / "ddp-straggler" / "rank1.trace.json.gz"
NSYS = SAMPLES / "nsys-nvfuser-h200" / "report1.sqlite"
NVML = SAMPLES / "health-h100" / "nvml-idle.replay.json"
LADDER = SAMPLES / "gemm-ladder-ncu" / "gemm_ladder.json"
NCU_XZ = SAMPLES / "gemm-ladder-ncu" / "gemm_ladder_h100_full.ncu-rep.xz"
DEEP = 100_000


def run(*args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["analyze", "--no-cache", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    """Exit code 2 and exactly one line on stderr, holding every needle (the file's name, the reason)."""
    assert code == 2, err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)


def report(*args: str, stdin: bytes | None = None) -> dict[str, Any]:
    code, out, err = run(*args, "--format", "json", stdin=stdin)
    assert code == 0, err
    return json.loads(out)


def kineto_text(sample: Path = KINETO) -> bytes:
    return gzip.decompress(sample.read_bytes())


def write_gz(path: Path, text: bytes) -> Path:
    path.write_bytes(gzip.compress(text))
    return path


def edited_kineto(tmp_path: Path, edit: Any, sample: Path = KINETO, name: str = "trace.json.gz") -> Path:
    """A copy of a real Kineto trace with ``edit(doc)`` applied to its parsed JSON, gzipped again."""
    doc = json.loads(kineto_text(sample))
    edit(doc)
    return write_gz(tmp_path / name, json.dumps(doc).encode())


# 1. gzip: isal's own error class, while sniffing and while loading; header fields that are valid must still read.

def test_gzip_with_a_garbled_header_flag(tmp_path: Path) -> None:
    """An edited copy of samples/decode-compile/trace.json.gz with the FEXTRA flag set in its gzip header
    (the file has no extra field: its MTIME is read as one). isal raises its own IsalError while sniffing."""
    raw = bytearray(KINETO.read_bytes())
    raw[3] |= 0x04
    bad = tmp_path / "trace.json.gz"
    bad.write_bytes(raw)
    assert_one_line_error(*run(str(bad))[::2], str(bad), "corrupt or truncated gzip")


def test_gzip_with_a_corrupt_deflate_block_past_the_sniffed_start(tmp_path: Path) -> None:
    """An edited copy of samples/decode-eager/trace.json.gz with 32 bytes inverted at 90 % of the file: the first
    MiB unpacks (the format is detected), the corrupt block fails while loading."""
    raw = bytearray(EAGER.read_bytes())
    at = len(raw) * 9 // 10
    raw[at : at + 32] = bytes(b ^ 0xFF for b in raw[at : at + 32])
    bad = tmp_path / "trace.json.gz"
    bad.write_bytes(raw)
    assert_one_line_error(*run(str(bad))[::2], str(bad), "corrupt or truncated gzip")


def gzip_with_fields(text: bytes, filename: bytes, extra: bytes) -> bytes:
    """A gzip member whose header carries FEXTRA and FNAME (what zlib and isal must skip)."""
    deflated = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = deflated.compress(text) + deflated.flush()
    header = b"\x1f\x8b\x08" + bytes([0x04 | 0x08]) + struct.pack("<I", 0) + b"\x00\xff"
    header += struct.pack("<H", len(extra)) + extra + filename + b"\x00"
    return header + body + struct.pack("<II", zlib.crc32(text), len(text) & 0xFFFFFFFF)


def test_valid_gzip_header_fields_read_like_the_original(tmp_path: Path) -> None:
    """samples/decode-compile/trace.json.gz unpacked and gzipped again with a file name (FNAME, as gzip.GzipFile
    writes it) and with an extra field and a file name (FEXTRA + FNAME): both read as the original."""
    text = kineto_text()
    with_name = io.BytesIO()
    with gzip.GzipFile(filename="trace.json", mode="wb", fileobj=with_name, mtime=0) as f:
        f.write(text)
    named = tmp_path / "named.json.gz"
    named.write_bytes(with_name.getvalue())
    assert named.read_bytes()[3] & 0x08  # FNAME set
    extra = tmp_path / "extra.json.gz"
    extra.write_bytes(gzip_with_fields(text, b"trace.json", b"TD\x02\x00ok"))
    original = report(str(KINETO))
    for copy in (named, extra):
        doc = report(str(copy))
        assert doc["inputs"][0]["events"] == original["inputs"][0]["events"] > 1000
        assert doc["summary"] == original["summary"]
        assert [f["rule"] for f in doc["findings"]] == [f["rule"] for f in original["findings"]]


# 2. Unchecked numbers: non-finite, beyond 64 bits, digits int() refuses.

@pytest.mark.parametrize("value", [b"Infinity", b"NaN", b"1e400", b"-Infinity"])
def test_kineto_device_id_that_is_not_a_finite_number(tmp_path: Path, value: bytes) -> None:
    """An edited copy of samples/decode-compile/trace.json.gz whose deviceProperties id is Infinity, NaN,
    1e400 (a float overflow Python reads as infinity) or -Infinity."""
    text = kineto_text()
    assert text.count(b'"id": 0,') == 1
    bad = write_gz(tmp_path / "trace.json.gz", text.replace(b'"id": 0,', b'"id": ' + value + b",", 1))
    assert_one_line_error(*run(str(bad))[::2], str(bad), "malformed trace header")


def test_kineto_rank_in_digits_int_refuses(tmp_path: Path) -> None:
    """An edited copy of samples/ddp-straggler/rank1.trace.json.gz whose distributedInfo.rank is "²" (a digit to
    str.isdigit, not to int()): the rank is not taken from it but from the file name, rank1."""
    def superscript(doc: dict[str, Any]) -> None:
        assert doc["distributedInfo"]["rank"] == 1
        doc["distributedInfo"]["rank"] = "²"

    edited = edited_kineto(tmp_path, superscript, STRAGGLER_RANK1, "rank1.trace.json.gz")
    doc = report(str(edited))
    assert doc["inputs"][0]["rank"] == 1 and doc["inputs"][0]["format"] == "torch"


@pytest.mark.parametrize("ts_us", [1e16, 5e15])
def test_kineto_event_times_beyond_any_clock(tmp_path: Path, ts_us: float) -> None:
    """An edited copy of samples/decode-compile/trace.json.gz whose first kernel starts at 1e16 µs (beyond 64-bit
    nanoseconds) or 5e15 µs (inside 64 bits, but past 2^62 ns, where analyses' sums would overflow)."""
    def far(doc: dict[str, Any]) -> None:
        kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
        kernel["ts"] = ts_us

    bad = edited_kineto(tmp_path, far)
    assert_one_line_error(*run(str(bad))[::2], str(bad))


@pytest.mark.parametrize("how", ["beyond 32 bits", "negative", "5,000 devices"])
def test_kineto_gpu_work_on_devices_no_trace_has(tmp_path: Path, how: str) -> None:
    """An edited copy of samples/decode-compile/trace.json.gz whose kernels run on device 2^40 (read as no device:
    the idle time said 100 % busy and every finding went, while the summary said 7 %), on device -1 (the kernels
    fell out of the attribution), or with 5,000 extra kernels each on a device of its own (a 9 MB trace took 17 GB
    in the per-device analyses): one line, exit 2."""
    def devices(doc: dict[str, Any]) -> None:
        kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
        if how == "5,000 devices":
            doc["traceEvents"] += [{**kernels[0], "pid": n, "args": {**kernels[0]["args"], "device": n}}
                                   for n in range(5000)]
            return
        for kernel in kernels:
            kernel["pid"] = kernel["args"]["device"] = 1 << 40 if how == "beyond 32 bits" else -1

    bad = edited_kineto(tmp_path, devices)
    assert_one_line_error(*run(str(bad))[::2], str(bad), "GPU work on a device")


def test_kineto_correlation_id_on_every_call(tmp_path: Path) -> None:
    """An edited copy of samples/decode-compile/trace.json.gz whose CUDA calls and GPU work all carry correlation id
    1: each launch joins its GPU work by that id, and the joins grew with the square of the calls (a 12 MB trace took
    20 GB): one line, exit 2."""
    def same(doc: dict[str, Any]) -> None:
        for event in doc["traceEvents"]:
            if "correlation" in event.get("args", {}):
                event["args"]["correlation"] = 1

    bad = edited_kineto(tmp_path, same)
    assert_one_line_error(*run(str(bad))[::2], str(bad), "one correlation id on more than two CUDA calls")


def test_nsys_times_near_int64_max(tmp_path: Path) -> None:
    """An edited copy of samples/nsys-nvfuser-h200/report1.sqlite with 9.2e18 ns added to every kernel's start
    and end (still valid 64-bit integers, 292 years from the others)."""
    bad = tmp_path / "report1.sqlite"
    shutil.copyfile(NSYS, bad)
    with sqlite3.connect(bad) as con:
        con.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = start + 9200000000000000000, '
                    '"end" = "end" + 9200000000000000000')
    con.close()
    assert_one_line_error(*run(str(bad))[::2], str(bad), "beyond any profiler clock")


def edited_recording(tmp_path: Path, query: str, value: Any) -> Path:
    doc = json.loads(NVML.read_text())
    assert query in doc["answers"]
    doc["answers"][query] = [{"value": value}]
    path = tmp_path / "nvml-idle.replay.json"
    path.write_text(json.dumps(doc))
    return path


def test_nvml_device_count_that_is_not_whole(tmp_path: Path) -> None:
    """An edited copy of samples/health-h100/nvml-idle.replay.json where nvmlDeviceGetCount answered 2.5."""
    bad = edited_recording(tmp_path, "nvmlDeviceGetCount[]", 2.5)
    assert_one_line_error(*run(str(bad))[::2], str(bad), "device count")


def test_nvml_answer_that_is_infinite(tmp_path: Path) -> None:
    """An edited copy of samples/health-h100/nvml-idle.replay.json where the power usage answer is Infinity."""
    doc = json.loads(NVML.read_text())
    query = next(q for q in doc["answers"] if q.startswith("nvmlDeviceGetPowerUsage"))
    doc["answers"][query] = [{"value": float("inf")}]
    bad = tmp_path / "nvml-idle.replay.json"
    bad.write_text(json.dumps(doc))  # json writes Infinity
    assert_one_line_error(*run(str(bad))[::2], str(bad), "non-finite")


@pytest.mark.parametrize(("key", "value", "reason"), [
    ("sm_clock_mhz", b"-Infinity", "non-finite number -Infinity"), ("ms", b"1e400", "number out of range"),
    ("sm_clock_mhz", b"1e300", "sm_clock_mhz must be a number from 0 to"), ("ms", b"1e-300", "ms must be at least")])
def test_gemm_ladder_numbers_out_of_range(tmp_path: Path, key: str, value: bytes, reason: str) -> None:
    """An edited copy of samples/gemm-ladder-ncu/gemm_ladder.json whose first result's sm_clock_mhz or ms is
    -Infinity, 1e400 (infinite as a float), 1e300 or 1e-300 (finite, but no clock or GEMM time)."""
    text = LADDER.read_bytes()
    doc = json.loads(text)
    old = json.dumps(doc["results"][0][key]).encode()
    field = f'"{key}": '.encode()
    assert field + old in text
    bad = tmp_path / "gemm_ladder.json"
    bad.write_bytes(text.replace(field + old, field + value, 1))
    assert_one_line_error(*run(str(bad))[::2], str(bad), reason)


# 3. Runaway nesting: RecursionError from the json module.

def nested(depth: int = DEEP) -> bytes:
    return b'"deep": ' + b"[" * depth + b"]" * depth + b", "


def test_deeply_nested_kineto_header(tmp_path: Path) -> None:
    """An edited copy of samples/decode-compile/trace.json.gz with a 100,000-deep array in its header."""
    text = kineto_text()
    bad = write_gz(tmp_path / "trace.json.gz", b"{" + nested() + text.lstrip()[1:])
    assert_one_line_error(*run(str(bad))[::2], str(bad), "nested too deeply")


def test_deeply_nested_nvml_recording(tmp_path: Path) -> None:
    """An edited copy of samples/health-h100/nvml-idle.replay.json with a 100,000-deep array after its tag."""
    text = NVML.read_bytes()
    tag_end = text.index(b",") + 1
    bad = tmp_path / "nvml-idle.replay.json"
    bad.write_bytes(text[:tag_end] + b" " + nested()[:-2] + b"," + text[tag_end:])
    assert_one_line_error(*run(str(bad))[::2], str(bad), "nested too deeply")


def test_deeply_nested_gemm_ladder(tmp_path: Path) -> None:
    """An edited copy of samples/gemm-ladder-ncu/gemm_ladder.json with a 100,000-deep array at its start."""
    text = LADDER.read_bytes().lstrip()
    bad = tmp_path / "gemm_ladder.json"
    bad.write_bytes(b"{" + nested() + text[1:])
    assert_one_line_error(*run(str(bad))[::2], str(bad), "nested too deeply")


# 4. Corrupt Nsight Systems exports: the one error, and no second message when the driver's objects are collected.

def corrupt_exports(tmp_path: Path) -> list[Path]:
    raw = NSYS.read_bytes()
    truncated = tmp_path / "truncated.sqlite"
    truncated.write_bytes(raw[: len(raw) // 2])
    flipped = bytearray(raw)
    flipped[482_546 : 482_546 + 64] = bytes(b ^ 0x5A for b in flipped[482_546 : 482_546 + 64])
    byte_flipped = tmp_path / "flipped.sqlite"
    byte_flipped.write_bytes(flipped)
    return [truncated, byte_flipped]


def test_corrupt_nsys_export_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Edited copies of samples/nsys-nvfuser-h200/report1.sqlite: cut to half its size, and with 64 bytes of a
    table page (offset 482,546) XORed with 0x5a, which the schema read passes and a table query fails on. The
    failed query's ADBC cursor must be closed with its connection, or collecting them prints a second error."""
    unraisable: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unraisable.append(f"{u.exc_type.__name__}: {u.exc_value}"))
    for bad in corrupt_exports(tmp_path):
        code, _, err = run(str(bad))
        gc.collect()
        assert_one_line_error(code, err, str(bad))
        assert unraisable == [], (bad.name, unraisable)


# 5. Files that are not regular: a FIFO blocks a reader forever.

def test_fifo_is_refused_and_skipped_in_a_directory(tmp_path: Path) -> None:
    """A FIFO given as input is refused at once; beside a copy of samples/decode-compile/trace.json.gz in a
    directory it is skipped. Run as a process with a timeout, so that a regression fails instead of hanging."""
    fifo = tmp_path / "ranks" / "rank1.trace.json"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    shutil.copyfile(KINETO, tmp_path / "ranks" / "rank0.trace.json.gz")
    env = {**os.environ, "TRACEDOC_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "tracedoc", "analyze", "--no-cache"]
    done = subprocess.run([*cmd, str(fifo)], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert_one_line_error(done.returncode, done.stderr, str(fifo), "not a regular file")
    done = subprocess.run([*cmd, str(fifo.parent), "--format", "json"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    assert [i["path"] for i in json.loads(done.stdout)["inputs"]] == [str(fifo.parent / "rank0.trace.json.gz")]


# 6. Decompression bombs and full disks.

def gzip_bomb(path: Path, inflated_mib: int) -> Path:
    """A Kineto-looking gzip (the traceEvents key, then blanks) that inflates to ``inflated_mib`` MiB: members of
    16 MiB of blanks, each compressed once and repeated (a gzip file may hold several members)."""
    blanks = gzip.compress(b" " * (16 << 20), compresslevel=9)
    with path.open("wb") as f:
        f.write(gzip.compress(b'{"traceEvents": [\n'))
        for _ in range(inflated_mib // 16):
            f.write(blanks)
        f.write(gzip.compress(b"]}\n"))
    return path


def test_decompression_bomb_stops_at_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A generated gzip of 1 GiB of blanks after a Kineto key (about 1 MB on disk), read with
    TRACEDOC_MAX_INFLATE_BYTES=64M: refused after 64 MiB, and the unpacked copy removed."""
    bomb = gzip_bomb(tmp_path / "bomb.json.gz", 1024)
    assert bomb.stat().st_size < 2 << 20
    monkeypatch.setenv(compressed.ENV_VAR, "64M")
    monkeypatch.setenv("TRACEDOC_CACHE_DIR", str(tmp_path / "cache"))
    code, _, err = run(str(bomb))
    assert_one_line_error(code, err, str(bomb), f"more than {64 << 20:,} bytes", compressed.ENV_VAR)
    assert not list((tmp_path / "cache").rglob("unpacked-*"))


def test_the_cap_has_a_command_line_option(tmp_path: Path) -> None:
    """The same kind of bomb refused through --max-inflate (the option sets the cap for this run only)."""
    bomb = gzip_bomb(tmp_path / "bomb.json.gz", 256)
    result = CliRunner().invoke(cli, ["analyze", str(bomb), "--no-cache", "--max-inflate", "32M"])
    assert_one_line_error(result.exit_code, result.stderr, str(bomb), f"more than {32 << 20:,} bytes", "--max-inflate")


def test_inflate_cap_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default cap is the larger of 100x the compressed size and 64 MiB (standard input: 4 GiB); the
    environment and a cap given (the option) replace both; a cap that is not a byte count is refused."""
    monkeypatch.delenv(compressed.ENV_VAR, raising=False)
    assert Limits.from_env() == Limits()
    assert compressed.max_inflate_bytes(470_000) == 64 << 20
    assert compressed.max_inflate_bytes(1 << 20) == 100 << 20
    assert compressed.max_inflate_bytes(1 << 30) == 100 << 30
    assert compressed.max_stdin_bytes() == 4 << 30
    monkeypatch.setenv(compressed.ENV_VAR, "8GiB")
    cap = Limits.from_env().max_inflate_bytes
    assert compressed.max_inflate_bytes(1 << 30, cap) == 8 << 30
    assert compressed.max_stdin_bytes(cap) == 8 << 30
    given = Limits.from_env(max_inflate_bytes=1000).max_inflate_bytes  # the option wins over the variable
    assert compressed.max_inflate_bytes(1 << 30, given) == 1000
    assert compressed.max_stdin_bytes(given) == 1000
    monkeypatch.setenv(compressed.ENV_VAR, "lots")
    with pytest.raises(TracedocError, match=compressed.ENV_VAR):
        Limits.from_env()
    with pytest.raises(TracedocError, match="positive"):
        Limits(max_inflate_bytes=0)


def test_every_compressed_sample_is_far_below_the_default_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Real traces inflate to less than a third of the default cap (they compress 2 to 40 times)."""
    monkeypatch.delenv(compressed.ENV_VAR, raising=False)
    samples = sorted(p for p in SAMPLES.rglob("*") if p.suffix in (".gz", ".xz"))
    assert len(samples) > 20
    for path in samples:
        raw = path.read_bytes()
        inflated = len(gzip.decompress(raw) if path.suffix == ".gz" else lzma.decompress(raw))
        assert inflated * 3 < compressed.max_inflate_bytes(len(raw)), path
        assert inflated < len(raw) * compressed.DEFAULT_RATIO / 2, path


def xz_bomb(path: Path, inflated_mib: int) -> Path:
    """A real trace turned into an xz bomb: samples/decode-compile's header and events, then 16 MiB blocks of its
    first 300 events repeated (each block compressed once, the file a series of xz streams), then the array's end.
    It unpacks to about ``inflated_mib`` MiB of valid events at some 1,000 times its size."""
    doc = json.loads(kineto_text())
    events = [json.dumps(e) for e in doc["traceEvents"]]
    head = json.dumps({k: v for k, v in doc.items() if k != "traceEvents"})[:-1] + ', "traceEvents": [\n'
    repeat = ("," + ",".join(events[:300])).encode()
    block = lzma.compress(repeat * ((16 << 20) // len(repeat)), preset=1)
    with path.open("wb") as f:
        f.write(lzma.compress((head + ",".join(events)).encode()))
        for _ in range(inflated_mib // 16):
            f.write(block)
        f.write(lzma.compress(b"\n]}\n"))
    return path


def test_xz_bomb_stops_at_the_default_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An xz bomb of about 1 MB made from samples/decode-compile that unpacks to 2 GiB of real events (under the
    old default cap of 4 GiB it was read whole: minutes and gigabytes): with no cap set, reading stops at the
    default, the larger of 64 MiB and 100 times the file, one line and exit 2. The work is bounded by the bytes
    unpacked, counted at the decompressor."""
    monkeypatch.delenv(compressed.ENV_VAR, raising=False)
    bomb = xz_bomb(tmp_path / "bomb.json.xz", 2048)
    size = bomb.stat().st_size
    assert size < 2 << 20
    cap = compressed.max_inflate_bytes(size)
    assert cap == max(100 * size, 64 << 20)
    unpacked = []
    real_open = compressed._open

    def counting_open(path: Path, kind: str) -> Any:
        stream = real_open(path, kind)
        read = stream.read

        def counted(size: int = -1) -> bytes:
            data = read(size)
            unpacked.append(len(data))
            return data

        stream.read = counted  # type: ignore[method-assign]
        return stream

    monkeypatch.setattr(compressed, "_open", counting_open)
    code, _, err = run(str(bomb))
    assert_one_line_error(code, err, str(bomb), f"more than {cap:,} bytes", "--max-inflate", compressed.ENV_VAR)
    assert sum(unpacked) <= cap + compressed._CHUNK + (1 << 20)  # the cap, one chunk past it, the sniffed MiB


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_full_disk_while_unpacking_is_not_a_corrupt_input(tmp_path: Path) -> None:
    """samples/decode-compile/trace.json.gz unpacked into /dev/full (every write fails with ENOSPC, through a link
    in a temporary directory): the error names the lack of space, not the file."""
    target = tmp_path / "unpacked.json"
    target.symlink_to("/dev/full")
    with pytest.raises(TracedocError) as caught:
        compressed.inflate(KINETO, "gzip", target, 1 << 30)
    assert not isinstance(caught.value, InputError)
    assert str(caught.value).startswith(f"no space left in {tmp_path} while decompressing {KINETO}")
    assert "corrupt" not in str(caught.value)
    assert Path("/dev/full").exists()


# 7. Conveniences: xz, and standard input.

def test_xz_kineto_trace_reads_like_gzip(tmp_path: Path) -> None:
    """samples/decode-compile/trace.json.gz recompressed with xz, given as a file and in a directory."""
    xz = tmp_path / "ranks" / "trace.json.xz"
    xz.parent.mkdir()
    xz.write_bytes(lzma.compress(kineto_text()))
    original = report(str(KINETO))
    for given in (xz, xz.parent):
        doc = report(str(given))
        assert doc["inputs"][0]["path"] == str(xz)
        assert doc["inputs"][0]["events"] == original["inputs"][0]["events"]
        assert doc["summary"] == original["summary"]


def test_a_gzip_beside_what_it_unpacks_to_is_one_trace(tmp_path: Path) -> None:
    """samples/decode-eager/trace.json.gz and the trace.json that ``gunzip -k`` leaves beside it: read as two
    separate runs before (2 ranks, and the note that they name none); now one trace, read from the plain file. A
    gzip of another name beside it is another trace still."""
    shutil.copy(EAGER, tmp_path / "trace.json.gz")
    (tmp_path / "trace.json").write_bytes(kineto_text(EAGER))
    doc = report(str(tmp_path))
    assert [i["path"] for i in doc["inputs"]] == [str(tmp_path / "trace.json")]
    assert doc["summary"] == report(str(EAGER))["summary"]
    (tmp_path / "trace.json.gz").rename(tmp_path / "other.json.gz")
    assert report(str(tmp_path))["summary"]["ranks"] == 2


def test_truncated_xz_is_one_line(tmp_path: Path) -> None:
    """samples/decode-eager/trace.json.gz recompressed with xz and cut at 90 % of its length."""
    packed = lzma.compress(kineto_text(EAGER))
    bad = tmp_path / "trace.json.xz"
    bad.write_bytes(packed[: len(packed) * 9 // 10])
    assert_one_line_error(*run(str(bad))[::2], str(bad), "corrupt or truncated xz")


def test_ncu_report_xz_given_by_name_and_set_aside_beside_its_csv() -> None:
    """The sample's .ncu-rep.xz reads as the report it holds when named; in its folder, beside the CSV export of
    the same kernels, it is an archive and is not read twice."""
    pytest.importorskip("ncu_report")
    doc = report(str(NCU_XZ))
    assert doc["inputs"][0]["format"] == "ncu" and doc["inputs"][0]["events"] == 4
    folder = report(str(NCU_XZ.parent))
    assert str(NCU_XZ) not in [i["path"] for i in folder["inputs"]]
    assert [i["format"] for i in folder["inputs"]].count("ncu") == 1


def test_standard_input(tmp_path: Path) -> None:
    """samples/decode-compile/trace.json.gz piped in as '-', gzipped and plain: the same report, naming '-'."""
    original = report(str(KINETO))
    for data in (KINETO.read_bytes(), kineto_text()):
        doc = report("-", stdin=data)
        assert doc["inputs"][0]["path"] == "-"
        assert doc["inputs"][0]["events"] == original["inputs"][0]["events"]
        assert doc["summary"] == original["summary"]
    code, _, err = run("-", stdin=b"\x1f\x8b\x08\x00 not really gzip")
    assert_one_line_error(code, err, "-: corrupt or truncated gzip")
    code, _, err = run("-", stdin=b"")
    assert_one_line_error(code, err, "-: empty file")


JULIA_CSV = SAMPLES / "ncu-a40-julia-csv" / "a40_julia_indexspaces.raw.base-units.csv"


def test_ncu_csv_whose_units_row_is_short(tmp_path: Path) -> None:
    """An edited copy of samples/ncu-a40-julia-csv's CSV whose units row lost its last column."""
    lines = JULIA_CSV.read_text().splitlines(keepends=True)
    lines[1] = lines[1].rstrip("\r\n").rsplit(",", 1)[0] + "\n"
    path = tmp_path / "kernels.raw.csv"
    path.write_text("".join(lines))
    code, _, err = run(str(path))
    assert_one_line_error(code, err, str(path), "units row")


def test_ncu_kernel_name_of_50000_characters(tmp_path: Path) -> None:
    """An edited copy of the same CSV with one kernel renamed to 50,000 characters of template arguments: linking
    names to a timeline works per character, and must stay linear in the name's length (it took over 3 GB)."""
    text = JULIA_CSV.read_text()
    name = re.search(r'"(julia_[^"]*)"', text).group(1)
    path = tmp_path / "kernels.raw.csv"
    path.write_text(text.replace(f'"{name}"', '"kern<' + "A<" * 12_500 + "x" + ">" * 12_500 + ">(int)\"", 1))
    code, out, err = run(str(path), "--format", "json")
    assert code == 0, err
    assert json.loads(out)["findings"]  # a report, and no progress bar in front of it


def test_ncu_csv_of_millions_of_values_is_read_columnar(tmp_path: Path) -> None:
    """An edited copy of samples/ncu-a40-julia-csv's export with its 5 launches repeated to 2,500 (1.9 million
    launch × metric values). One Python object per value took 358 MiB of Python heap for 2.2 million values (a
    2.4 MB gzipped export took 1.25 GB in all, and the fuzzer saw 3 GB); read columnar, the Python heap holds a few
    chunks of the file (under 40 MiB) however many values there are, and every repeat's values are the original's."""
    with JULIA_CSV.open(newline="") as f:
        rows = list(csv.reader(f))
    header, units, body = rows[0], rows[1], rows[2:]
    id_at = header.index("ID")
    path = tmp_path / "kernels.raw.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f, quoting=csv.QUOTE_ALL)
        writer.writerows([header, units])
        writer.writerows([str(n) if i == id_at else v for i, v in enumerate(body[n % len(body)])]
                         for n in range(2500))
    original = [b.to_pylist() for b in ncu_csv.read(JULIA_CSV, tmp_path).metrics]
    tracemalloc.start()
    try:
        tables = ncu_csv.read(path, tmp_path)
        batches = [(b.num_rows, b.slice(0, 10).to_pylist()) for b in tables.metrics]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    per_copy = sum(len(b) for b in original)
    assert tables.count == 2500 and per_copy > 3000
    assert sum(n for n, _ in batches) == per_copy * 2500 // len(body)
    assert batches[0][1] == original[0][:10]
    assert peak < 40 << 20, f"{peak / 2**20:.0f} MiB of Python objects"


def test_first_line_drops_a_quoted_traceback_and_cuts_runaway_lines() -> None:
    text = ("Invalid Input Error: reading the stream failed: Invalid: Failed to parse string: '' as a scalar of "
            "type int64. Detail: Python exception: Traceback (most recent call last):")
    assert first_line(ValueError(text)).endswith("type int64.")
    assert len(first_line(ValueError("9" * 5000))) == 1001


def test_flight_recorder_json_with_an_integer_of_5001_digits(tmp_path: Path) -> None:
    """An edited copy of samples/hang-ondemand-healthy's JSON dump of rank 0 whose first record id has 5,001
    digits (past Python's limit for turning digits into an int)."""
    source = SAMPLES / "hang-ondemand-healthy" / "ondemand_dump_nccl_trace_json.json.rank0"
    text = source.read_text()
    edited, count = re.subn(r'"record_id":\d+', '"record_id":' + "7" * 5001, text, count=1)
    assert count == 1
    path = tmp_path / source.name
    path.write_text(edited)
    code, _, err = run(str(path))
    assert_one_line_error(code, err, str(path), "flight-recorder JSON")


# 9. Saved reports given to `tracedoc diff`, and files of the kernel's.

REPORTS = ROOT / "reports"


def _set(doc: dict[str, Any], where: str, value: Any) -> None:
    """Set (or, for the value DELETE, remove) the field at a dotted path such as 'attribution.2.ms'; '*' is every
    element of a list."""
    *path, last = where.split(".")
    parents = [doc]
    for key in path:
        parents = [child for p in parents for child in (p if key == "*" else [p[int(key) if isinstance(p, list)
                                                                                  else key]])]
    for parent in parents:
        if value is DELETE:
            del parent[last]
        else:
            parent[int(last) if isinstance(parent, list) else last] = value


DELETE = object()
MALFORMED_REPORTS = {  # each ended in an internal error (exit 3) somewhere in the diff
    "row-not-an-object": ("ddp-straggler", "attribution.2", "x", "attribution[2] should be an object"),
    "device-a-list": ("decode-eager", "attribution.2.device", [[]], "attribution[2].device should be an integer"),
    "ms-an-object": ("decode-eager", "attribution.0.ms", {"a": 1}, "attribution[0].ms should be a number"),
    "no-cause": ("input-slow", "attribution.1.cause", DELETE, "attribution[1].cause should be present"),
    "kernel-an-object": ("ncu-h100-gemm-naive", "metrics.ncu_warp_stalls.*.kernel", {},
                         "metrics.ncu_warp_stalls[0].kernel should be text"),
    "metric-not-a-list": ("input-slow", "metrics.ncu_warp_stalls", 1.5, "metrics.ncu_warp_stalls should be a list"),
    "total-a-list": ("moe-hot-expert", "metrics.top_kernels.1.total_ms", [[]],
                     "metrics.top_kernels[1].total_ms should be a number"),
    "count-not-a-number": ("decode-eager", "metrics.top_kernels.0.launch_count", "<x>",
                           "metrics.top_kernels[0].launch_count should be a number"),
    "summary-not-an-object": ("ncu-h100-gemm-naive", "summary", True, "summary should be an object"),
    "set-aside-without-its-path": ("conv-step-cycles", "summary.set_aside.0", {"judged": "x", "pid": 476},
                                   "summary.set_aside[0].path should be present"),
    "saving-an-object": ("input-slow", "findings.0.impact_ms", {"a": 1}, "findings[0].impact_ms should be a number"),
    "total-out-of-range": ("decode-eager", "metrics.top_kernels.*.total_ms", 1e308,
                           "metrics.top_kernels[0].total_ms should be a number of at most 1e+15"),
}


@pytest.mark.parametrize("case", MALFORMED_REPORTS, ids=list(MALFORMED_REPORTS))
def test_malformed_saved_report_given_to_diff(tmp_path: Path, case: str) -> None:
    """An edited copy of a gallery report (reports/<sample>.json, what `tracedoc analyze --format json` wrote for
    a bundled sample) diffed against the original, on either side: one line naming the field, exit 2."""
    base, where, value, says = MALFORMED_REPORTS[case]
    original = REPORTS / f"{base}.json"
    doc = json.loads(original.read_text())
    _set(doc, where, value)
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps({"findings": doc.pop("findings"), **doc}))
    for sides in ((edited, original), (original, edited)):
        result = CliRunner().invoke(cli, ["diff", *map(str, sides), "--format", "json"])
        assert_one_line_error(result.exit_code, result.stderr, str(edited), "not a tracedoc JSON report", says)


def test_saved_report_with_nan_is_refused(tmp_path: Path) -> None:
    """reports/decode-eager.json with an attribution time written as NaN (Python's json reads it)."""
    edited = tmp_path / "edited.json"
    text, count = re.subn(r'"ms": [0-9.]+', '"ms": NaN', (REPORTS / "decode-eager.json").read_text(), count=1)
    assert count == 1
    edited.write_text(text)
    result = CliRunner().invoke(cli, ["diff", str(edited), str(REPORTS / "decode-cudagraph.json")])
    assert_one_line_error(result.exit_code, result.stderr, str(edited), "non-finite number NaN")


def test_every_gallery_report_is_a_valid_saved_report() -> None:
    """The check of saved reports accepts what tracedoc writes: every report of the gallery."""
    from tracedoc.saved import check_report

    paths = sorted(REPORTS.glob("*.json"))
    assert len(paths) > 40
    for path in paths:
        check_report(json.loads(path.read_text()))


@pytest.mark.skipif(not Path("/proc/kmsg").exists(), reason="needs /proc/kmsg")
@pytest.mark.parametrize("args", [["analyze", "/proc/kmsg"], ["diff", "/proc/kmsg", str(KINETO)]],
                         ids=["analyze", "diff"])
def test_a_file_of_the_kernel_is_bad_input(args: list[str]) -> None:
    """/proc/kmsg (size 0; reading it waits for the kernel's messages, or takes them) ended in exit 3 as a diff
    side. It is not read: one line, exit 2."""
    result = CliRunner().invoke(cli, [args[0], "--no-cache", *args[1:]] if args[0] == "analyze" else args)
    assert_one_line_error(result.exit_code, result.stderr, "/proc/kmsg")


# 10. One file under several names.

def test_a_link_to_a_trace_is_not_another_rank(tmp_path: Path) -> None:
    """samples/ddp-straggler's two ranks copied into a folder with a symbolic link to rank 1 (sorted first) and a
    hard link to rank 0 beside them: the links counted as more ranks (here two traces claimed rank 1). Each file is
    read once, under its own name; a file named and also inside the folder named is one input too."""
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for name in ("rank0.trace.json.gz", "rank1.trace.json.gz"):
        shutil.copyfile(STRAGGLER_RANK1.with_name(name), ranks / name)
    (ranks / "a-latest.trace.json.gz").symlink_to(ranks / "rank1.trace.json.gz")
    os.link(ranks / "rank0.trace.json.gz", ranks / "z-hardlink.trace.json.gz")
    doc = report(str(ranks), str(ranks / "rank1.trace.json.gz"))
    assert [(i["path"], i["rank"]) for i in doc["inputs"]] == [
        (str(ranks / "rank0.trace.json.gz"), 0), (str(ranks / "rank1.trace.json.gz"), 1)]
    assert doc["summary"]["ranks"] == 2


def test_a_killed_runs_copy_of_standard_input_is_removed_by_the_next_one(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A run killed while it read standard input leaves its copy (``tracedoc-stdin-PID-…``, perhaps gigabytes):
    the next run that reads standard input removes the copies of runs that are gone, never a live run's."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the run's copies go
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    dead = tmp_path / f"tracedoc-stdin-{gone}-left"
    live = tmp_path / f"tracedoc-stdin-{os.getpid()}-reading"
    for path in (dead, live):
        path.write_bytes(b"{}")
    doc = report("-", stdin=(SAMPLES / "decode-eager" / "trace.json.gz").read_bytes())
    assert doc["inputs"][0]["path"] == "-"
    assert not dead.exists() and live.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name]  # its own copy went too

"""Read a large allocator snapshot: `tracedoc analyze` wall time and peak RSS on a snapshot of about 1 GB.

    python benchmarks/memory_snapshot.py --make bench-data/snapshot-1g.pickle          # build it (once)
    python benchmarks/memory_snapshot.py bench-data/snapshot-1g.pickle                 # measure

The snapshot is the real one of samples/memory-leak repeated: its segments (with their blocks) and its allocator
history, each copy shifted to fresh addresses and later times, written as torch's ``_dump_snapshot`` writes one
(one pickle, protocol 4, in frames of 64 KiB, every dict memoized, frames and strings shared through the memo), to
the size asked for. By default the copies share the sample's stacks and strings, so that after the first copy
every entry's stack is a BINGET; with ``--fresh`` each copy's stacks are new lists and each entry's compile_context
a new string, as torch builds them (each allocation's stack a list of its own, shared only by the events of the
same block). The measurement runs ``tracedoc analyze`` (into an empty cache) under ``/usr/bin/time -v`` and prints
the wall time, the CPU time (user + system), the peak resident memory, the load average before the run and what
the report says.
"""

from __future__ import annotations

import argparse
import gzip
import os
import pickle
import re
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "memory-leak" / "snapshot.pickle.gz"
FRAME_TARGET = 64 * 1024


class _Writer:
    """A protocol-4 pickle writer that shares every string and list (and every dict but the records) through the
    memo, as pickle does for the objects torch's snapshot shares, and frames its output."""

    def __init__(self, out) -> None:
        self.out = out
        self.buf = bytearray()
        self.memo: dict[int, int] = {}
        self.keep: dict[int, object] = {}  # what the memo refers to stays alive (ids are not reused)
        self.count = 0  # memo entries written (records are memoized too, but never referred to again)
        self.written = 0

    def op(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) >= FRAME_TARGET:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.out.write(b"\x95" + struct.pack("<Q", len(self.buf)) + self.buf)
            self.written += 9 + len(self.buf)
            self.buf = bytearray()

    def memoize(self, obj, share: bool = True) -> None:
        if share:
            self.memo[id(obj)] = self.count
            self.keep[id(obj)] = obj
        self.count += 1
        self.buf += b"\x94"

    def release(self, objs: list) -> None:
        """Objects that will not be written again: no longer shared through the memo, nor kept alive."""
        for obj in objs:
            self.memo.pop(id(obj), None)
            self.keep.pop(id(obj), None)

    def ref(self, obj) -> bool:
        idx = self.memo.get(id(obj))
        if idx is None:
            return False
        self.buf += b"h" + bytes([idx]) if idx < 256 else b"j" + struct.pack("<I", idx)
        return True

    def value(self, v, record: bool = False) -> None:
        if v is None:
            self.buf += b"N"
        elif v is True or v is False:
            self.buf += b"\x88" if v else b"\x89"
        elif isinstance(v, int):
            if 0 <= v < 256:
                self.buf += b"K" + bytes([v])
            elif 0 <= v < 65536:
                self.buf += b"M" + struct.pack("<H", v)
            elif -(1 << 31) <= v < (1 << 31):
                self.buf += b"J" + struct.pack("<i", v)
            else:
                raw = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
                self.buf += b"\x8a" + bytes([len(raw)]) + raw
        elif isinstance(v, float):
            self.buf += b"G" + struct.pack(">d", v)
        elif isinstance(v, str):
            if not self.ref(v):
                raw = v.encode("utf-8", "surrogatepass")
                self.buf += (b"\x8c" + bytes([len(raw)]) if len(raw) < 256 else b"X" + struct.pack("<I", len(raw)))
                self.buf += raw
                self.memoize(v)
        elif isinstance(v, list):
            if not self.ref(v):
                self.buf += b"]"
                self.memoize(v)
                self.items(v)
        elif isinstance(v, dict):
            if record or not self.ref(v):
                self.buf += b"}"
                self.memoize(v, share=not record)
                if v:
                    self.buf += b"("
                    for key, item in v.items():
                        self.value(key)
                        self.value(item)
                    self.buf += b"u"
        elif isinstance(v, tuple) and len(v) <= 3:
            for item in v:
                self.value(item)
            self.buf += b")\x85\x86\x87"[len(v):len(v) + 1]
            self.count += 1
            self.buf += b"\x94"
        else:
            raise TypeError(type(v))
        if len(self.buf) >= FRAME_TARGET:
            self.flush()

    def items(self, values, record: bool = False) -> None:
        for start in range(0, len(values), 1000):  # pickle's batches
            self.buf += b"("
            for item in values[start:start + 1000]:
                self.value(item, record)
            self.buf += b"e"


def make(path: Path, target_bytes: int, fresh: bool = False) -> None:
    snapshot = pickle.loads(gzip.decompress(SAMPLE.read_bytes()))
    segments, traces = snapshot["segments"], snapshot["device_traces"]
    per_copy = len(gzip.decompress(SAMPLE.read_bytes()))
    t0 = min(e["time_us"] for t in traces for e in t)
    span = max(e["time_us"] for t in traces for e in t) - t0 + 1000
    lo = min(s["address"] for s in segments)
    stride = 1 << 40
    copies = 1
    with path.open("wb") as out:
        w = _Writer(out)
        out.write(b"\x80\x04")
        w.buf += b"}"
        w.memoize(snapshot)
        w.buf += b"("
        w.value("segments")
        w.buf += b"]"
        w.memoize(segments)
        # the history is the bulk of a snapshot: a tenth of the copies for the segments is plenty
        seg_copies = max(1, target_bytes // per_copy // 10)
        for k in range(seg_copies):
            shifted = []
            for s in segments:
                seg = dict(s, address=s["address"] - lo + k * stride + (1 << 44))
                seg["blocks"] = [dict(b, address=b["address"] - s["address"] + seg["address"]) for b in s["blocks"]]
                shifted.append(seg)
            for start in range(0, len(shifted), 1000):
                w.buf += b"("
                for seg in shifted[start:start + 1000]:
                    w.value(seg, record=True)
                w.buf += b"e"
        w.value("device_traces")
        w.buf += b"]"
        w.memoize(traces)
        for entries in traces:
            w.buf += b"]"
            w.memoize(entries)
            batch: list = []
            k = 0
            made: list = []  # with fresh: the lists and strings of this copy, then of the copies not yet written
            done: list = []
            while True:
                stacks: dict[int, list] = {}
                for e in entries:
                    entry = dict(e, addr=e["addr"] - lo + k * stride + (1 << 44) if e.get("addr") else e["addr"],
                                 time_us=e["time_us"] + k * span)
                    if fresh:
                        _fresh(entry, stacks, made)
                    batch.append(entry)
                    if len(batch) == 1000:
                        w.items(batch, record=True)
                        batch = []
                        w.release(done)
                        done = []
                done += made
                made = []
                k += 1
                if w.written + len(w.buf) >= target_bytes:
                    break
            if batch:
                w.items(batch, record=True)
            copies = k
            w.buf += b"a"
        for key in ("allocator_settings", "external_annotations"):
            if key in snapshot:
                w.value(key)
                w.value(snapshot[key])
        w.buf += b"u."
        w.flush()
    print(f"wrote {path}: {path.stat().st_size:,} bytes, the history {copies:,} times "
          f"({copies * sum(len(t) for t in traces):,} entries), the segments {seg_copies:,} times "
          f"({seg_copies * len(segments):,} segments, {seg_copies * sum(len(s['blocks']) for s in segments):,} blocks)")


def _fresh(entry: dict, stacks: dict[int, list], made: list) -> None:
    """An entry of a copy as torch's ``_snapshot()`` builds it: its stack a new list (shared with the other events
    of the same copy that shared it), its compile_context a new string; the frames in the stacks stay shared."""
    frames = entry.get("frames")
    if isinstance(frames, list):
        if id(frames) not in stacks:
            stacks[id(frames)] = list(frames)
            made.append(stacks[id(frames)])
        entry["frames"] = stacks[id(frames)]
    if isinstance(entry.get("compile_context"), str):
        entry["compile_context"] = entry["compile_context"].encode().decode()
        made.append(entry["compile_context"])


def measure(path: Path, extra: list[str], keep: Path | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        # the store on disk, as a first `tracedoc analyze` of a file makes it (in a cache of its own)
        cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "tracedoc", "analyze", str(path), "--cache-dir",
               str(Path(tmp) / "cache"), "--out", str(out), *extra]
        load = os.getloadavg()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
        wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", proc.stderr)
        rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
        cpu = [re.search(rf"{kind} time \(seconds\): ([\d.]+)", proc.stderr) for kind in ("User", "System")]
        print(f"exit {proc.returncode}; wall {wall.group(1) if wall else '?'}; CPU "
              f"{sum(float(m.group(1)) for m in cpu if m):.1f} s (user + system); peak RSS "
              f"{int(rss.group(1)) / 1024:,.0f} MiB; load average before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
              if rss else "peak RSS ?")
        if proc.returncode:
            print("\n".join(line for line in proc.stderr.splitlines() if "\t" not in line)[-2000:])
        elif out.exists():
            import json

            report = json.loads(out.read_text())
            for m in report.get("memory") or []:
                frag = m.get("fragmentation") or {}
                print(f"device {m.get('device')}: reserved {m.get('reserved_bytes')} stranded "
                      f"{frag.get('stranded_bytes')}; top sites {[s['site'] for s in m.get('top_sites') or []][:3]}")
            print("inputs:", [(i["format"], i["events"]) for i in report["inputs"]])
            if keep is not None:
                keep.write_bytes(out.read_bytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snapshot", type=Path)
    parser.add_argument("--make", action="store_true", help="build the snapshot instead of measuring")
    parser.add_argument("--size", type=float, default=1.0, help="GB to build (default 1)")
    parser.add_argument("--report", type=Path, help="keep the JSON report there (to compare two versions)")
    parser.add_argument("--fresh", action="store_true",
                        help="build each copy's stacks and compile_context strings anew, as torch does (each "
                             "allocation's stack a list of its own) instead of sharing the sample's")
    args, extra = parser.parse_known_args()
    if args.make:
        args.snapshot.parent.mkdir(parents=True, exist_ok=True)
        make(args.snapshot, int(args.size * 1e9), args.fresh)
    else:
        measure(args.snapshot, extra, args.report)


if __name__ == "__main__":
    main()

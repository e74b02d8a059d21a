"""Allocator snapshots read in bulk (tracedoc/ingest/memory/snapshot_bulk.py) give the rows the opcode machine alone
gives: on the samples (samples/memory-*), on copies of the leak's history written as torch writes larger ones, and on
edited copies whose records the fast path does not know (another key, values of other kinds, other protocols, no
frames, nothing memoized), where the opcode machine reads what it cannot. What it refuses stays refused in one line."""

from __future__ import annotations

import gzip
import pickle
import pickletools
import random
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SAMPLES, checkpoints_running, slow_checkpoints
from tracedoc.errors import InputError
from tracedoc.ingest.memory import memory_snapshot, snapshot_bulk
from tracedoc.store import Store

TABLES = ("memory_segments", "memory_blocks", "memory_actions")
LEAK = SAMPLES / "memory-leak" / "snapshot.pickle.gz"


def _load(path: Path, bulk: bool = True) -> tuple[dict[str, list[tuple]], int]:
    """The memory tables' rows in the order written, and how many records the fast path read (bulk=False: the
    opcode machine alone)."""
    read = []
    original = snapshot_bulk.Bulk.records

    def records(self: snapshot_bulk.Bulk, data: bytes, i: int) -> tuple | None:
        run = original(self, data, i) if bulk else None
        if run is not None:
            read.append(run[0].count)
        return run

    with pytest.MonkeyPatch.context() as patch, Store.create(None) as store:
        patch.setattr(snapshot_bulk.Bulk, "records", records)
        memory_snapshot.load(store, 1, path, path.parent)
        rows = {table: store.con.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall() for table in TABLES}
    return rows, sum(read)


def _outcome(path: Path, bulk: bool = True) -> tuple[str, object]:
    """('rows', the rows) or ('error', the one-line message without the path)."""
    try:
        return "rows", _load(path, bulk)[0]
    except InputError as exc:
        return "error", str(exc).removeprefix(f"{path}: ")


def _write(tmp_path: Path, data: bytes, name: str = "snapshot.pickle") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _leak() -> dict:
    return pickle.loads(gzip.decompress(LEAK.read_bytes()))


def _copies(snapshot: dict, copies: int, fresh: bool) -> dict:
    """The history repeated ``copies`` times at later times; with ``fresh`` each copy's stacks are new lists and its
    compile_context strings new strings (as torch builds them), else the copies share the sample's."""
    entries = snapshot["device_traces"][0]
    span = entries[-1]["time_us"] - entries[0]["time_us"] + 1
    history = []
    for k in range(copies):
        stacks: dict[int, list] = {}
        for e in entries:
            entry = dict(e, time_us=e["time_us"] + k * span)
            if fresh:
                entry["frames"] = stacks.setdefault(id(e["frames"]), list(e["frames"]))
                entry["compile_context"] = e["compile_context"].encode().decode()
            history.append(entry)
    return dict(snapshot, device_traces=[history])


def _unframed(data: bytes) -> bytes:
    """The pickle without its FRAME opcodes (frames are optional)."""
    frames = [pos for op, _, pos in pickletools.genops(data) if op.name == "FRAME"]
    for pos in reversed(frames):
        data = data[:pos] + data[pos + 9:]
    return data


@pytest.mark.parametrize("case", ["leak", "oom", "fixed", "fragment"])
def test_the_samples_read_alike_nearly_all_in_bulk(case: str, tmp_path: Path) -> None:
    path = _write(tmp_path, gzip.decompress((SAMPLES / f"memory-{case}" / "snapshot.pickle.gz").read_bytes()))
    rows, fast = _load(path)
    assert rows == _load(path, bulk=False)[0]
    history = len(rows["memory_actions"])
    assert history > 1000 and fast >= history - 3  # a record cut by a FRAME opcode is left to the opcode machine


@pytest.mark.parametrize("fresh", [False, True], ids=["shared stacks", "fresh stacks"])
def test_larger_histories_read_alike(fresh: bool, tmp_path: Path) -> None:
    path = _write(tmp_path, pickle.dumps(_copies(_leak(), 12, fresh), protocol=4))
    rows, fast = _load(path)
    assert rows == _load(path, bulk=False)[0]
    assert len(rows["memory_actions"]) == 12 * 1379 and fast > 0.99 * 12 * 1379
    assert len({row[-1] for row in rows["memory_actions"]}) > 10  # stacks, not all NULL


def test_records_of_unknown_shapes_read_alike(tmp_path: Path) -> None:
    """Another key, values of other kinds, a stack with a frame twice: each such record changes the shape the fast
    path expects, and what it cannot match the opcode machine reads."""
    snapshot = _copies(_leak(), 3, fresh=True)
    rng = random.Random(3)
    for n, entry in enumerate(snapshot["device_traces"][0]):
        edit = rng.randrange(12)
        if edit == 0:
            entry["extra"] = n
        elif edit == 1:
            entry["addr"] = None
        elif edit == 2:
            entry["time_us"] = float(entry["time_us"])
        elif edit == 3:
            entry["size"] = 1 << 70  # a LONG1 of 9 bytes: past 64 bits
        elif edit == 4:
            entry["stream"] = -n
        elif edit == 5:
            entry["action"] = "ållöc " * 50  # past 255 bytes: BINUNICODE
        elif edit == 6 and entry["frames"]:
            entry["frames"] = entry["frames"] + entry["frames"][:1]  # a frame twice in one new list
        elif edit == 7:
            entry["stream"] = True
        elif edit == 8:
            entry.pop("compile_context")
    path = _write(tmp_path, pickle.dumps(snapshot, protocol=4))
    rows, fast = _load(path)
    assert rows == _load(path, bulk=False)[0]
    assert 0.5 * len(rows["memory_actions"]) < fast < len(rows["memory_actions"])
    addr, size = zip(*((row[4], row[5]) for row in rows["memory_actions"]))
    assert None in addr and None in size  # an address None, a size past 64 bits: NULL, as before


@pytest.mark.parametrize("form", ["protocol 2", "protocol 3", "protocol 5", "unframed", "optimized"])
def test_other_protocols_and_layouts_read_alike(form: str, tmp_path: Path) -> None:
    """Protocols 2 and 3 BINPUT instead of MEMOIZE (nothing for the fast path); protocol 5 and a protocol-4 pickle
    without frames are read in bulk; pickletools.optimize leaves only the memoized values that are referred to."""
    snapshot = _copies(_leak(), 2, fresh=True)
    protocol = int(form[-1]) if form.startswith("protocol") else 4
    data = pickle.dumps(snapshot, protocol=protocol)
    data = _unframed(data) if form == "unframed" else pickletools.optimize(data) if form == "optimized" else data
    path = _write(tmp_path, data)
    rows, fast = _load(path)
    assert rows == _load(path, bulk=False)[0]
    assert len(rows["memory_actions"]) == 2 * 1379
    assert (fast == 0) if form in ("protocol 2", "protocol 3", "optimized") else fast > 2 * 1370


def test_hostile_pickles_are_refused_alike(tmp_path: Path) -> None:
    snapshot = _leak()
    entry = snapshot["device_traces"][0][5]
    cases = {
        # a record referred to again, in the next batch of 1000 too
        "again": pickle.dumps(dict(snapshot, device_traces=[[dict(e) for e in snapshot["device_traces"][0][:40]]
                                                            + [entry] * 2000])),
        # a class asked for inside a record of the history
        "global": pickle.dumps(dict(snapshot, device_traces=[[dict(entry, frames=Path("x"))] * 1 + [entry]])),
        # a value nested past the bound on depth
        "deep": pickle.dumps(dict(snapshot, device_traces=[[dict(entry, frames=_deep(40))]])),
        # a BINGET past the memo's end
        "ahead": _ahead(pickle.dumps(dict(snapshot, device_traces=[snapshot["device_traces"][0][:300]]))),
    }
    for name, data in cases.items():
        path = _write(tmp_path, data, f"{name}.pickle")
        fast, alone = _outcome(path), _outcome(path, bulk=False)
        assert fast[0] == "error" and fast == alone, (name, fast, alone)
        assert "\n" not in str(fast[1])


def test_a_stack_read_in_bulk_is_never_appended_to(tmp_path: Path) -> None:
    """Records whose stacks are the same BINGETs share one list; a pickle that appends to such a list later (torch's
    never does) is refused rather than changing the stacks of all of them."""
    snapshot = _leak()
    entries = snapshot["device_traces"][0][:200]
    first = next(e for e in entries if e["frames"])
    entries = [dict(e, frames=list(first["frames"])) for e in entries]  # new lists, same frames: BINGETs only
    data = pickle.dumps({"segments": [], "device_traces": [entries], "x": entries[-1]["frames"]}, protocol=4)
    end = data.rindex(b"u.")
    path = _write(tmp_path, data[:end] + b"Na" + data[end:])  # APPEND None to the list of key 'x'
    assert _outcome(path) == ("error", "the pickle appends to a stack already read; not as torch writes snapshots")
    assert _outcome(path, bulk=False)[0] == "rows"


def test_mutants_read_alike_or_are_refused_in_one_line(tmp_path: Path) -> None:
    """Bytes changed at random in a history written as torch writes one: the fast path gives the opcode machine's
    rows, or its error; it refuses more only for a reference back to a record (the opcode machine allows one to a
    record of the batch not yet handed over) or an append to a shared stack."""
    real = pickle.dumps(_copies(_leak(), 2, fresh=True), protocol=4)
    start = real.index(b"device_traces")
    rng = random.Random(11)
    outcomes = set()
    for i in range(60):
        data = bytearray(real)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(start, len(data))] = rng.randrange(256)
        path = _write(tmp_path, bytes(data), f"mutant{i}.pickle")
        fast, alone = _outcome(path), _outcome(path, bulk=False)
        outcomes.add(fast[0])
        assert "\n" not in str(fast[1]) if fast[0] == "error" else True
        if fast != alone:
            assert fast[0] == "error" and any(why in str(fast[1]) for why in (
                "refers back to a record", "appends to a stack")), (i, fast, alone)
    assert outcomes == {"rows", "error"}


def _deep(n: int) -> dict:
    value: dict = {}
    for _ in range(n):
        value = {"frames": value, "line": 1}  # two keys: SETITEMS after a MARK
    return value


def _ahead(data: bytes) -> bytes:
    """The pickle with the last LONG_BINGET of a record's key pointing 100,000 slots past the memo's end."""
    at = data.rindex(b"j", 0, data.rindex(b"device_traces") + 5000)
    while data[at + 3:at + 5] != b"\x00\x00":
        at = data.rindex(b"j", 0, at)
    return data[:at + 1] + (100_000).to_bytes(4, "little") + data[at + 5:]


def _uncompressed_rows(path: Path, flush_rows: int | None = None) -> tuple[int, int, dict[str, list[tuple]]]:
    """Read ``path`` into a store in memory (as `--no-cache` does), writing every ``flush_rows`` rows (None: the
    reader's own batch): the history rows its store holds uncompressed before the store is complete, all of them,
    and the memory tables' rows."""
    with pytest.MonkeyPatch.context() as patch, Store.create(None) as store:
        if flush_rows is not None:
            patch.setattr(memory_snapshot, "_FLUSH_ROWS", flush_rows)
        memory_snapshot.load(store, 1, path, path.parent)
        uncompressed = store.scalar("SELECT coalesce(sum(count), 0) FROM pragma_storage_info('memory_actions') "
                                    "WHERE column_name = 'addr' AND segment_type <> 'VALIDITY' "
                                    "AND compression = 'Uncompressed'")
        rows = {table: store.con.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall() for table in TABLES}
    return int(uncompressed), len(rows["memory_actions"]), rows


def test_a_store_in_memory_holds_at_most_one_batch_of_rows_uncompressed(tmp_path: Path) -> None:
    """The store is checkpointed after each batch the reader writes, so that a store in memory holds at most one
    batch of history rows uncompressed while the snapshot is read, not the whole history (a 1 GB snapshot's 12.6 M
    rows took 3.2 GB so); the rows are the same whatever the batch."""
    path = _write(tmp_path, pickle.dumps(_copies(_leak(), 4, fresh=False), protocol=4))
    whole, total, rows = _uncompressed_rows(path)
    assert total > 5000 and whole == total  # one batch: nothing checkpointed before the store is complete
    held, total_small, rows_small = _uncompressed_rows(path, flush_rows=1000)
    assert total_small == total and rows_small == rows
    assert held <= 1000


def test_a_snapshot_that_fails_while_the_store_is_compressed_leaves_nothing_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The leak sample's history copied four times, cut short (an edited copy), written every 1,000 rows: the read
    fails while the rows written before are compressed on a helper thread (Store.compress_aside, each checkpoint
    made slow so that one runs then). The load names the input, and leaves no helper thread running."""
    data = pickle.dumps(_copies(_leak(), 4, fresh=False), protocol=4)
    path = _write(tmp_path, data[:len(data) * 9 // 10])
    compressions = slow_checkpoints(monkeypatch, 0.3)  # still running when the read fails
    monkeypatch.setattr(memory_snapshot, "_FLUSH_ROWS", 1000)
    with pytest.raises(InputError, match=path.name), Store.create(None) as store:
        memory_snapshot.load(store, 1, path, path.parent)
    assert compressions
    assert not checkpoints_running()


def test_the_rows_are_written_once_the_rows_before_them_are_compressed(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The leak sample's history copied four times, written every 1,000 rows, each checkpoint made slow: the reader
    goes on while the rows written before are compressed on a helper thread (Store.compress_aside), and writes
    again only once every checkpoint started is done; the rows are those of one batch."""

    path = _write(tmp_path, pickle.dumps(_copies(_leak(), 4, fresh=False), protocol=4))
    started = slow_checkpoints(monkeypatch, 0.05)
    running_at_write = []
    write = memory_snapshot._Columns.write

    def writing(columns: Any, *args: Any) -> None:
        running_at_write.append(sum(not running.done for running in started))
        write(columns, *args)

    monkeypatch.setattr(memory_snapshot._Columns, "write", writing)
    _, total, rows = _uncompressed_rows(path, flush_rows=1000)
    assert len(started) >= 5 and running_at_write == [0] * len(running_at_write)
    assert rows == _uncompressed_rows(path)[2]

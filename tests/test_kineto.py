"""PyTorch profiler traces into the store: checked against an independent json-module reading of real samples."""

from __future__ import annotations

import gzip
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from tests.conftest import SAMPLES, checkpoints_running, slow_checkpoints
from tracedoc.api import open_store
from tracedoc.cli import cli
from tracedoc.ingest import discover, load_all
from tracedoc.store import Store
from tracedoc.store.store import scalar

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset", "cuda_sync": "sync"}


def reference(path: Path) -> dict:
    """What the file holds, read the slow, obvious way."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    events = doc["traceEvents"]
    return {"doc": doc, "gpu": Counter(GPU_CATS[e["cat"]] for e in events if e.get("ph") == "X"
                                       and e.get("cat") in GPU_CATS),
            "steps": sorted(int(e["name"].split("#")[1]) for e in events
                            if str(e.get("name", "")).startswith("ProfilerStep#")
                            and e.get("cat") != "gpu_user_annotation"),
            "kernel_ns": sum(int(e["dur"] * 1000 + 0.5) for e in events if e.get("cat") == "kernel")}


def ingest(tmp_path: Path, *paths: Path) -> Store:
    store, _ = open_store(discover(list(paths)), tmp_path / "cache")
    return store


@pytest.mark.parametrize("sample", ["decode-eager", "decode-cudagraph", "input-slow", "ddp-overlap"])
def test_every_gpu_activity_is_stored(sample: str, tmp_path: Path) -> None:
    for trace in sorted((SAMPLES / sample).glob("*.json.gz")):
        ref = reference(trace)
        with ingest(tmp_path / trace.name, trace) as store:
            assert store.self_check() == []
            rows = store.query("SELECT kind, count(*) AS n FROM gpu_activity GROUP BY kind")
            assert {r["kind"]: r["n"] for r in rows} == dict(ref["gpu"])
            assert store.scalar("SELECT sum(dur_ns) FROM gpu_activity WHERE kind = 'kernel'") == ref["kernel_ns"]
            assert [r["step"] for r in store.query("SELECT step FROM steps ORDER BY step")] == sorted(set(ref["steps"]))


def test_cuda_graph_kernels_do_not_vanish(tmp_path: Path) -> None:
    """Kernels replayed by cudaGraphLaunch are stored and linked to the graph launch that issued them."""
    trace = SAMPLES / "decode-cudagraph" / "trace.json.gz"
    with ingest(tmp_path, trace) as store:
        assert store.scalar("SELECT count(*) FROM gpu_activity WHERE kind = 'kernel'") == \
            reference(trace)["gpu"]["kernel"]
        store.include("gpu.launch")
        stats = store.query("SELECT kernel_count, graph_kernel_count FROM gpu_launch_stats")[0]
        assert stats["graph_kernel_count"] > 0.5 * stats["kernel_count"]


def test_rank_comes_from_distributed_info(tmp_path: Path) -> None:
    with ingest(tmp_path, SAMPLES / "ddp-overlap") as store:
        rows = store.query("SELECT path, rank, world_size FROM sources ORDER BY rank")
    assert [(Path(r["path"]).name, r["rank"], r["world_size"]) for r in rows] == [
        ("rank0.trace.json.gz", 0, 2), ("rank1.trace.json.gz", 1, 2)]


def test_rank_falls_back_to_the_file_name(tmp_path: Path) -> None:
    """A trace without distributedInfo (as older or single-process runs write) takes its rank from its name."""
    doc = json.loads(gzip.decompress((SAMPLES / "ddp-overlap" / "rank1.trace.json.gz").read_bytes()))
    del doc["distributedInfo"]
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    (ranks / "worker_rank7.json").write_text(json.dumps(doc))
    with ingest(tmp_path, ranks) as store:
        assert store.scalar("SELECT rank FROM sources") == 7
        assert store.scalar("SELECT count(DISTINCT rank) FROM gpu_activity") == 1
        assert store.scalar("SELECT min(rank) FROM gpu_activity") == 7


def test_plain_and_gzipped_traces_give_the_same_store(tmp_path: Path) -> None:
    gz = SAMPLES / "input-slow" / "trace.json.gz"
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    counts = []
    for i, path in enumerate((gz, plain)):
        with ingest(tmp_path / str(i), path) as store:
            counts.append(store.query("SELECT kind, count(*) AS n, sum(dur_ns) AS d FROM gpu_activity "
                                      "GROUP BY kind ORDER BY kind"))
    assert counts[0] == counts[1]


def test_large_traces_are_read_in_several_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Splitting the event array at event boundaries loses and duplicates nothing."""
    import tracedoc.ingest.chrome.chrome_trace as chrome_trace

    trace = SAMPLES / "decode-eager" / "trace.json.gz"
    monkeypatch.setattr(chrome_trace, "_PART_BYTES", 64 << 10)  # ~60 parts instead of one
    with ingest(tmp_path, trace) as store:
        assert store.scalar("SELECT count(*) FROM gpu_activity") == sum(reference(trace)["gpu"].values())


@pytest.mark.parametrize("packed", [True, False])
def test_a_store_in_memory_holds_one_batch_of_rows_uncompressed(packed: bool, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows stored while other parts follow are compressed before the next parts' rows go in: a store in memory keeps
    its rows uncompressed until a checkpoint, and they sat beside the next parts' rows (the 205 MB trace's peak went
    from 331 to 294 MiB without the cache, docs/speed.md). The checkpoint runs while the next parts are parsed
    (Store.compress_aside). decode-eager cut in 64 KiB parts, read in batches as it unpacks and from the unpacked
    file."""
    import tracedoc.ingest.chrome.chrome_trace as chrome_trace

    trace = SAMPLES / "decode-eager" / "trace.json.gz"
    if not packed:
        trace = tmp_path / "trace.json"
        trace.write_bytes(gzip.decompress((SAMPLES / "decode-eager" / "trace.json.gz").read_bytes()))
    monkeypatch.setattr(chrome_trace, "_PART_BYTES", 64 << 10)
    monkeypatch.setattr(chrome_trace, "_MIN_PART_BYTES", 64 << 10)
    uncompressed_before_each_batch = []
    normalize = chrome_trace._normalize

    def normalizing(con: duckdb.DuckDBPyConnection, *args: Any) -> None:
        uncompressed_before_each_batch.append(scalar(con, "SELECT count(*) FROM pragma_storage_info('gpu_activity') "
                                                          "WHERE NOT persistent"))
        normalize(con, *args)

    monkeypatch.setattr(chrome_trace, "_normalize", normalizing)
    store, _ = open_store(discover([trace]), None)
    with store:
        gpu_work = sum(reference(SAMPLES / "decode-eager" / "trace.json.gz")["gpu"].values())
        assert store.scalar("SELECT count(*) FROM gpu_activity") == gpu_work
    assert len(uncompressed_before_each_batch) >= (2 if packed else 50)
    assert uncompressed_before_each_batch[1:] == [0] * (len(uncompressed_before_each_batch) - 1)


@pytest.mark.parametrize("packed", [True, False])
def test_each_batch_goes_in_once_the_rows_before_it_are_compressed(packed: bool, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """decode-eager cut in 1 MiB parts, each checkpoint made slow: the next batch is parsed while the rows before it
    are compressed on a helper thread (Store.compress_aside), and its rows are normalized into the store only once
    every checkpoint started is done. The events are all stored."""
    import tracedoc.ingest.chrome.chrome_trace as chrome_trace

    trace = SAMPLES / "decode-eager" / "trace.json.gz"
    if not packed:
        trace = tmp_path / "trace.json"
        trace.write_bytes(gzip.decompress((SAMPLES / "decode-eager" / "trace.json.gz").read_bytes()))
    monkeypatch.setattr(chrome_trace, "_PART_BYTES", 1 << 20)
    started = slow_checkpoints(monkeypatch, 0.1)
    running_at_normalize = []
    normalize = chrome_trace._normalize

    def normalizing(*args: Any) -> None:
        running_at_normalize.append(sum(not running.done for running in started))
        normalize(*args)

    monkeypatch.setattr(chrome_trace, "_normalize", normalizing)
    with Store.create(None) as store:
        load_all(store, discover([trace]))
        gpu_work = sum(reference(SAMPLES / "decode-eager" / "trace.json.gz")["gpu"].values())
        assert store.scalar("SELECT count(*) FROM gpu_activity") == gpu_work
    assert started and len(running_at_normalize) == len(started) + 1
    assert running_at_normalize == [0] * len(running_at_normalize)


@pytest.mark.parametrize("packed", [True, False])
def test_a_batch_that_fails_while_the_store_is_compressed_leaves_nothing_running(
        packed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """decode-eager (an edited copy: one event near the end made malformed), cut in 1 MiB parts: the batch that holds
    it fails while the rows before it are compressed on a helper thread (Store.compress_aside). The load names the
    input, and leaves no helper thread running (each checkpoint made slow, so that it runs when the batch fails)."""
    import tracedoc.ingest.chrome.chrome_trace as chrome_trace
    from tracedoc.errors import InputError

    text = gzip.decompress((SAMPLES / "decode-eager" / "trace.json.gz").read_bytes())
    at = text.index(b'"ph": "X"', len(text) - (200 << 10))  # in the last batch, unpacked as it streams too
    text = text[:at] + b'"ph" "X"' + text[at + len(b'"ph": "X"'):]
    trace = tmp_path / ("trace.json.gz" if packed else "trace.json")
    trace.write_bytes(gzip.compress(text) if packed else text)
    monkeypatch.setattr(chrome_trace, "_PART_BYTES", 1 << 20)
    compressions = slow_checkpoints(monkeypatch, 0.3)  # still running when the batch fails
    with pytest.raises(InputError, match=f"{trace.name}: malformed trace JSON"), Store.create(None) as store:
        load_all(store, discover([trace]))
    assert compressions
    assert not checkpoints_running()


def test_second_analysis_reuses_the_store(tmp_path: Path) -> None:
    trace = SAMPLES / "decode-cudagraph" / "trace.json.gz"
    copy = tmp_path / "renamed.json.gz"
    shutil.copy(trace, copy)
    first, cached_first = open_store(discover([trace]), tmp_path / "cache")
    first.close()
    second, cached_second = open_store(discover([copy]), tmp_path / "cache")  # same bytes, other name
    second.close()
    assert (cached_first, cached_second) == (False, True)
    assert len(list((tmp_path / "cache").glob("*.duckdb"))) == 1


def _plain_ranks(sample: str, into: Path) -> list[Path]:
    """The sample's gzipped rank traces unpacked into ``into`` (plain files are read together, in one batch)."""
    into.mkdir(parents=True)
    ranks = []
    for trace in sorted((SAMPLES / sample).glob("rank*.trace.json.gz")):
        ranks.append(into / trace.name.removesuffix(".gz"))
        ranks[-1].write_bytes(gzip.decompress(trace.read_bytes()))
    return ranks


PER_SOURCE = {
    "gpu_activity": "count(*) AS n, sum(dur_ns) AS d, sum(ts_ns % 1000003) AS t, count(correlation_id) AS c",
    "cpu_activity": "count(*) AS n, sum(dur_ns) AS d, sum(ts_ns % 1000003) AS t, count(external_id) AS c",
    "steps": "count(*) AS n, sum(dur_ns) AS d, sum(step) AS s",
    "collective_calls": "count(*) AS n, sum(dur_ns) AS d, count(DISTINCT pg_name) AS g",
}


def _per_source(store: Store) -> dict[str, list[dict]]:
    return {table: store.query(f"SELECT source_id, rank, {columns} FROM {table} GROUP BY source_id, rank "
                               "ORDER BY source_id")
            for table, columns in PER_SOURCE.items()}


def test_plain_ranks_read_together_give_each_rank_its_own_rows(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain rank traces are parsed several files at a time, parts of two ranks in one pass (small parts here, so
    that a pass holds the end of one rank and the start of the next): every row keeps its own rank's source and
    rank, exactly as when each gzipped rank is read alone."""
    import tracedoc.ingest.chrome.chrome_trace as chrome_trace

    sample = SAMPLES / "moe-hot-expert-4rank"
    with ingest(tmp_path / "alone", sample) as store:
        alone = _per_source(store)
    monkeypatch.setattr(chrome_trace, "_PART_BYTES", 600 << 10)  # 3 parts a rank, parsed 2 at a time
    passes = []
    real_read = chrome_trace._read_events
    monkeypatch.setattr(chrome_trace, "_read_events",
                        lambda con, parts, *limit: passes.append(parts) or real_read(con, parts, *limit))
    with ingest(tmp_path / "together", *_plain_ranks("moe-hot-expert-4rank", tmp_path / "plain")) as store:
        assert store.self_check() == []
        together = _per_source(store)
    assert any(len({p.source_id for p in parts}) > 1 for parts in passes)
    assert together == alone
    assert [r["rank"] for r in together["gpu_activity"]] == [0, 1, 2, 3]


def test_a_bad_rank_among_plain_ranks_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank read in one pass with others is named by its own path when its events are malformed or its times out
    of range, and the error shows no temporary part file."""
    import tracedoc.ingest.chrome.chrome_trace as chrome_trace
    from tracedoc.errors import InputError

    monkeypatch.setattr(chrome_trace, "_PART_BYTES", 16 << 20)  # each rank one part, both in one pass
    ranks = _plain_ranks("ddp-straggler", tmp_path / "mangled")
    text = ranks[1].read_text()
    ranks[1].write_text(text.replace('"ph": "X"', '"ph" "X"', 1))
    with pytest.raises(InputError) as mangled:
        ingest(tmp_path / "c1", *ranks)
    assert str(mangled.value).startswith(f"{ranks[1]}: malformed trace JSON")
    assert "tracedoc-ingest-" not in str(mangled.value)

    ranks = _plain_ranks("ddp-straggler", tmp_path / "far")
    doc = json.loads(ranks[1].read_text())
    next(e for e in doc["traceEvents"] if e.get("ph") == "X")["ts"] = 1e300
    ranks[1].write_text(json.dumps(doc))
    with pytest.raises(InputError) as far:
        ingest(tmp_path / "c2", *ranks)
    assert str(far.value).startswith(f"{ranks[1]}: trace events with times or values out of range")


def test_a_trace_is_parsed_on_one_thread_per_bytes_per_thread(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """input-slow unpacked (1 MB), with _BYTES_PER_THREAD lowered to a third of it and small parts: read on 3 of the
    8 threads set, three parts a statement, and the 8 given back afterwards; the same GPU activity (count and time
    by kind) as read on all 8."""
    import tracedoc.ingest.chrome.chrome_trace as chrome_trace
    import tracedoc.ingest.chrome.kineto as kineto

    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress((SAMPLES / "input-slow" / "trace.json.gz").read_bytes()))
    monkeypatch.setattr(chrome_trace, "_BYTES_PER_THREAD", -(-plain.stat().st_size // 3))
    monkeypatch.setattr(chrome_trace, "_MIN_PART_BYTES", 64 << 10)
    seen: list[tuple[int, int]] = []
    read_events = chrome_trace._read_events

    def spy(con: duckdb.DuckDBPyConnection, parts: list[chrome_trace.Part], *limit: int | None) -> dict[int, int]:
        seen.append((int(con.execute("SELECT current_setting('threads')").fetchone()[0]), len(parts)))
        return read_events(con, parts, *limit)

    counts = []
    for spied in (True, False):
        monkeypatch.setattr(chrome_trace, "_read_events", spy if spied else read_events)
        if not spied:
            monkeypatch.setattr(chrome_trace, "_BYTES_PER_THREAD", 1)  # every thread set
        with Store.create(None) as store:
            store.con.execute("SET threads = 8")
            kineto.load(store, 0, plain, tmp_path)
            assert store.threads() == 8
            counts.append(store.query("SELECT kind, count(*) AS n, sum(dur_ns) AS d FROM gpu_activity "
                                      "GROUP BY kind ORDER BY kind"))
    assert seen and all(threads == 3 for threads, _ in seen) and max(n for _, n in seen) == 3
    assert counts[0] == counts[1]


# Where an event of each category belongs, as the profiler's docs name them (any case): a GPU activity's kind, a
# host activity's kind, or neither ('Trace' spans, flows, the GPU's own copies of annotations).
_GPU_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset",
              "memset": "memset", "cuda_sync": "sync"}
_HOST_KINDS = {"cpu_op": "op", "operator": "op", "cuda_runtime": "runtime", "runtime": "runtime",
               "cuda_driver": "driver", "user_annotation": "annotation", "python_function": "python"}


def _expected_place(cat: str | None) -> tuple[str, str] | None:
    """("gpu" or "host", kind) for an event of category ``cat``; None where neither table keeps it."""
    if cat is None or cat.lower() in ("trace", "ac2g"):
        return None
    if cat.lower() in _GPU_KINDS:
        return "gpu", _GPU_KINDS[cat.lower()]
    if cat.lower().startswith("gpu_"):
        return None
    return "host", _HOST_KINDS.get(cat.lower(), "other")


def test_every_category_lands_where_it_belongs(tmp_path: Path) -> None:
    """An edited copy of a real trace, its timed events' categories rewritten in turn to every category the reader
    names, in other cases, unknown, absent and the GPU's own annotations: each event lands in the table and kind
    its category says, and the categories tracedoc does not analyse are counted per category (all but 'overhead')."""
    doc = json.loads(gzip.decompress((SAMPLES / "decode-eager" / "trace.json.gz").read_bytes()))
    cats: list[str | None] = [*_GPU_KINDS, *_HOST_KINDS, "Kernel", "CUDA_Runtime", "Operator", "Trace", "ac2g",
                              "gpu_user_annotation", "GPU_something", "overhead", "Overhead", "my_category",
                              "My_Category", None]
    timed = [e for e in doc["traceEvents"] if e.get("ph") == "X" and "ts" in e]
    for i, event in enumerate(timed):
        if cats[i % len(cats)] is None:
            event.pop("cat", None)
        else:
            event["cat"] = cats[i % len(cats)]
    path = tmp_path / "categories.json"
    path.write_text(json.dumps(doc))
    expected: Counter = Counter()
    others: Counter = Counter()
    for event in timed:
        place = _expected_place(event.get("cat"))
        if place is not None:
            expected[place] += 1
        if place is not None and place[1] == "other" and event["cat"].lower() != "overhead":
            others[event["cat"]] += 1
    with ingest(tmp_path, path) as store:
        stored = Counter({("gpu", r["kind"]): r["n"]
                          for r in store.query("SELECT kind, count(*) AS n FROM gpu_activity GROUP BY kind")})
        stored.update({("host", r["kind"]): r["n"]
                       for r in store.query("SELECT kind, count(*) AS n FROM cpu_activity GROUP BY kind")})
        counted = {r["category"]: r["n"] for r in
                   store.query("SELECT category, sum(events) AS n FROM torch_other_events GROUP BY category")}
    assert stored == expected
    assert counted == dict(others)
    assert {"gpu", "host"} == {place for place, _ in stored} and len(counted) == 2


def test_flows_give_correlations_where_the_activity_has_none(tmp_path: Path) -> None:
    """An edited copy of a real trace whose GPU activity lost its 'correlation' argument (as older profilers wrote
    it): each activity gets back the correlation of the flow ('ac2g', phase f) that ends on it."""
    original = SAMPLES / "decode-eager" / "trace.json.gz"
    doc = json.loads(gzip.decompress(original.read_bytes()))
    for event in doc["traceEvents"]:
        if event.get("cat") in GPU_CATS and isinstance(event.get("args"), dict):
            event["args"].pop("correlation", None)
    edited = tmp_path / "no-correlation.json"
    edited.write_text(json.dumps(doc))
    query = "SELECT kind, ts_ns, correlation_id FROM gpu_activity ORDER BY ts_ns, kind, correlation_id"
    with ingest(tmp_path / "a", original) as store:
        expected = store.query(query)
    with ingest(tmp_path / "b", edited) as store:
        linked = store.query(query)
    assert sum(r["correlation_id"] is not None for r in linked) > 0.9 * len(expected)
    assert [r for r in linked if r["correlation_id"] is not None] == \
        [r for r, s in zip(expected, linked) if s["correlation_id"] is not None]


TORCH_OUTPUTS = Path(__file__).parent / "data" / "torch-outputs"


@pytest.mark.parametrize(("name", "said"), [
    ("key_averages.txt", "this is the table of the PyTorch profiler's key_averages(), which tracedoc does not read; "
                         "give tracedoc the trace (prof.export_chrome_trace('trace.json'), or "
                         "torch.profiler.tensorboard_trace_handler)"),
    *((name, "this is the PyTorch profiler's memory timeline (export_memory_timeline), which tracedoc does not read; "
             "give tracedoc the trace recorded with profile_memory=True, or an allocator snapshot "
             "(torch.cuda.memory._dump_snapshot)") for name in ("memory_timeline.json.gz", "memory_timeline.html")),
])
def test_what_the_profiler_writes_besides_its_trace_is_named(name: str, said: str) -> None:
    """The table of key_averages() and the memory timeline as an H200 run wrote them (tests/data/torch-outputs): one
    line, exit 2, that names the file and asks for the trace, where each was 'not a trace format'."""
    result = CliRunner().invoke(cli, ["analyze", "--no-cache", str(TORCH_OUTPUTS / name)])
    assert result.exit_code == 2 and result.output.strip() == f"Error: {TORCH_OUTPUTS / name}: {said}"

"""Scale-out benchmark: a 256-rank job built from real traces, analysed serially and on a Dask cluster.

The job: every rank is a real PyTorch profiler trace of expert-parallel MoE training (samples/moe-balanced, its
ranks 0 and 1 alternating) with its rank, its clock (each rank 1 ms apart, as on different hosts) and its
collectives edited to plant two problems the analysis must find:
  - a straggler: rank 137's compute before every size exchange (the first all-to-all of each MoE layer) runs
    0.5 ms longer, so every other rank waits 0.5 ms longer inside that collective;
  - a hot expert: rank 42 receives 1.5x the tokens in every dispatch all-to-all and computes 0.3 ms longer
    before every combine all-to-all, where the others wait for it.
One job must run the same collectives on every rank, so all ranks come from the balanced 2-rank sample
(samples/moe-hot-expert-4rank already has a hot expert in its rank 2, which 64 copies would repeat); the 4-rank
sample sets the skew planted here (its hot rank receives up to 2.9x the mean). The job is written to /tmp, never
committed.

It is analysed serially (tracedoc analyze), with --workers 2, cold (empty cache) and warm (the per-rank stores
cached), each in a process of its own whose peak memory is the client's. The per-rank cost is measured at two
sizes (a job rank, and a rank tiled in time to about 40 MB, benchmarks/tile_trace.py) to project the wall time
and client memory for 1024 ranks × 200 MB.

    python benchmarks/scale.py                      # build /tmp/tracedoc-scale/job, run, print the tables
    python benchmarks/scale.py --ranks 64 --skip-projection
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "samples" / "moe-balanced"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
STRAGGLER_OF_256, HOT_OF_256 = 137, 42
STRAGGLER_US, HOT_US, HOT_SKEW = 500.0, 300.0, 1.5


def load(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def is_nccl(e: dict[str, Any]) -> bool:
    return e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower()


def planted(ranks: int) -> tuple[int, int]:
    """The straggler and the hot-expert rank of a job of ``ranks`` ranks (137 and 42 of 256)."""
    return STRAGGLER_OF_256 * ranks // 256, HOT_OF_256 * ranks // 256


def plant(doc: dict[str, Any], rank: int, ranks: int) -> dict[str, Any]:
    """One rank of the job: the template trace with its rank, clock and collectives edited (see the docstring)."""
    straggler, hot = planted(ranks)
    events = doc["traceEvents"]
    nccl = sorted((e for e in events if is_nccl(e)), key=lambda e: e["ts"])
    compute = sorted((e for e in events if e.get("cat") == "kernel" and not is_nccl(e)),
                     key=lambda e: e["ts"] + e["dur"])
    points: list[tuple[float, float]] = []  # (original time, delay inserted there)
    extended: dict[int, float] = {}
    calls = {e["args"]["External id"]: e for e in events if e.get("name") == "record_param_comms"}
    for i, kernel in enumerate(nccl[1:]):  # the first one was queued before the window
        role = i % 3  # each MoE layer: size exchange, dispatch, combine
        late, delay = {0: (straggler, STRAGGLER_US), 2: (hot, HOT_US)}.get(role, (None, 0.0))
        if role == 1 and rank == hot:  # the hot expert's rank receives more tokens in the dispatch
            for args in (kernel["args"], calls.get(kernel["args"].get("External id"), {}).get("args", {})):
                if "Out msg nelems" in args:
                    args["Out msg nelems"] = int(args["Out msg nelems"] * HOT_SKEW)
        if late is None:
            continue
        if rank == late:  # its compute before the collective runs longer
            before = [k for k in compute if k["ts"] + k["dur"] <= kernel["ts"]]
            if before:
                extended[id(before[-1])] = extended.get(id(before[-1]), 0.0) + delay
                points.append((before[-1]["ts"] + before[-1]["dur"], delay))
            else:
                points.append((kernel["ts"], delay))
        else:  # the others wait for it inside the collective
            extended[id(kernel)] = extended.get(id(kernel), 0.0) + delay
            points.append((kernel["ts"] + kernel["dur"], delay))
    points.sort()
    clock = rank * 1000.0  # each rank's clock 1 ms apart
    for e in events:
        if not isinstance(e.get("ts"), int | float):
            continue
        if e.get("cat") in GPU_CATS or (e.get("cat") == "ac2g" and e.get("ph") == "f"):
            e["ts"] += sum(d for p, d in points if p <= e["ts"])
            if id(e) in extended:
                e["dur"] += extended[id(e)]
        e["ts"] += clock
    info = doc["distributedInfo"]
    info.update(rank=rank, world_size=ranks)
    for pg in info.get("pg_config", []):
        pg.update(pg_size=ranks, ranks=list(range(ranks)))
    for e in events:
        args = e.get("args")
        if isinstance(args, dict) and "Group size" in args:
            args["Group size"] = ranks
            args["Process Group Ranks"] = str(list(range(ranks)))
            if "Rank" in args:
                args["Rank"] = rank
    return doc


def build_job(out: Path, ranks: int) -> Path:
    """Write the job's traces (rank000.trace.json.gz, …) into ``out`` unless they are there already."""
    marker = out / ".complete"
    if marker.exists() and marker.read_text() == str(ranks):
        return out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    templates = [(TEMPLATE / f"rank{r}.trace.json.gz").read_bytes() for r in (0, 1)]
    for rank in range(ranks):
        doc = plant(json.loads(gzip.decompress(templates[rank % 2])), rank, ranks)
        (out / f"rank{rank:03d}.trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode(), 1))
    marker.write_text(str(ranks))
    return out


def run_once(job: Path, cache: Path, workers: int | None) -> dict[str, Any]:
    """One analysis in this process (called in a child process by ``measure``): wall time, peak memory, verdict."""
    start = time.perf_counter()
    if workers is None:
        from tracedoc.api import analyze

        report = analyze(job, cache_dir=cache)
    else:
        from tracedoc.scale import ClusterSpec, analyze_distributed

        report = analyze_distributed(job, ClusterSpec(workers=workers), cache_dir=cache)
    wall = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"wall_s": round(wall, 2), "client_peak_mb": round(peak_mb),
            "ranks": report.summary["ranks"], "missing": len(report.summary.get("missing_ranks", [])),
            "straggler": [f.scope.rank for f in report.findings if f.rule == "straggler-rank"],
            "hot_expert": [f.scope.rank for f in report.findings if f.rule == "expert-imbalance"]}


def measure(job: Path, cache: Path, workers: int | None) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--run", str(job), "--cache", str(cache)]
    if workers is not None:
        cmd += ["--workers", str(workers)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def distributed_rank_cost(job: Path, cache: Path, ranks_per_batch: int) -> tuple[float, float]:
    """Seconds a worker spends per rank (both passes, from an empty cache) and bytes a rank hands back (both
    passes, the collectives it is sent included), with ``ranks_per_batch`` ranks to a task: the distributed path's
    own functions, run in this process."""
    from tracedoc.api import METRICS
    from tracedoc.ingest import discover
    from tracedoc.judge import load_rules
    from tracedoc.options import AnalysisOptions
    from tracedoc.scale.exports import report_exports
    from tracedoc.scale.job import _Job, _tasks, plan_batches
    from tracedoc.scale.worker import analyse_ranks, summarize_ranks

    shutil.rmtree(cache, ignore_errors=True)
    tasks = _tasks(discover([job]), cache, AnalysisOptions())
    batches = plan_batches(tasks, max(1, len(tasks) // ranks_per_batch))
    exports = report_exports(load_rules(()), None, METRICS)
    start = time.perf_counter()
    read = sorted(((b, summarize_ranks(b)) for b in batches), key=lambda r: r[0][0].indices)
    worker_s = time.perf_counter() - start
    summaries = _Job(read, AnalysisOptions())
    summaries.align()
    total = sum(t.nbytes for _, summary in read for t in summary.tables.values())
    for batch, _ in read:
        collectives = summaries.collectives(batch)
        start = time.perf_counter()
        second = analyse_ranks(batch, summaries.ranks, collectives, exports)
        worker_s += time.perf_counter() - start
        total += collectives.nbytes + sum(t.nbytes for t in second.values())
    return worker_s / len(tasks), total / len(tasks)


def tiled_job(out: Path, mb: float) -> Path:
    """A 2-rank job of the template's ranks tiled in time to about ``mb`` MB of JSON each."""
    if not (out / ".complete").exists():
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        for r in (0, 1):
            subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tile_trace.py"),
                            str(TEMPLATE / f"rank{r}.trace.json.gz"), str(out / f"rank{r}.trace.json"),
                            "--min-mb", str(mb)], check=True, capture_output=True)
        (out / ".complete").write_text("")
    return out


def json_mb(job: Path) -> float:
    """Mean uncompressed JSON size of a job's ranks, MB."""
    sizes = [len(gzip.decompress(p.read_bytes())) if p.suffix == ".gz" else p.stat().st_size
             for p in sorted(job.glob("rank*.json*"))]
    return sum(sizes) / len(sizes) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--work", type=Path, default=Path("/tmp/tracedoc-scale"))
    parser.add_argument("--run", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--skip-projection", action="store_true")
    args = parser.parse_args()
    if args.run is not None:
        print(json.dumps(run_once(args.run, args.cache, args.workers)))
        return
    workers = args.workers or 2
    job = build_job(args.work / f"job-{args.ranks}", args.ranks)
    straggler, hot = planted(args.ranks)
    print(f"job: {args.ranks} ranks of {json_mb(job):.2f} MB JSON each, straggler {straggler}, hot expert {hot}")
    rows = []
    for mode, w in (("serial", None), (f"--workers {workers}", workers)):
        cache = args.work / f"cache-{args.ranks}-{'serial' if w is None else w}"
        shutil.rmtree(cache, ignore_errors=True)
        for state in ("cold", "warm"):
            result = measure(job, cache, w)
            rows.append({"mode": mode, "cache": state, **result})
            print(json.dumps(rows[-1]), flush=True)
            assert result["straggler"] == [straggler] and result["hot_expert"] == [hot], result
    if args.skip_projection:
        return
    small_mb = json_mb(job)
    serial_small = next(r for r in rows if r["mode"] == "serial" and r["cache"] == "cold")["wall_s"] / args.ranks
    client_peak = next(r for r in rows if r["mode"] != "serial" and r["cache"] == "cold")["client_peak_mb"]
    big = tiled_job(args.work / "tiled-40", 40.0)
    big_mb = json_mb(big)
    cache = args.work / "cache-tiled"
    shutil.rmtree(cache, ignore_errors=True)
    serial_big = measure(big, cache, None)["wall_s"] / 2
    # A rank of 200 MB is a batch of its own (larger than a batch takes): the projection is through ranks analysed
    # one per task; beside it, the cost per rank of small ranks 8 to a task.
    small_job = build_job(args.work / "job-8", 8)
    small_s, small_bytes = distributed_rank_cost(small_job, args.work / "cache-8", 1)
    batched_s, _ = distributed_rank_cost(small_job, args.work / "cache-8", 8)
    big_s, big_bytes = distributed_rank_cost(big, args.work / "cache-tiled-dist", 1)

    def at_200(small: float, large: float) -> float:  # linear in the rank's size, through the two measurements
        return small + (large - small) / (big_mb - small_mb) * (200 - small_mb)

    serial_200, worker_200, bytes_200 = at_200(serial_small, serial_big), at_200(small_s, big_s), at_200(
        small_bytes, big_bytes)
    base_mb = client_peak - args.ranks * small_bytes / 1e6
    print(json.dumps({
        "rank_mb": [round(small_mb, 2), round(big_mb, 1), 200],
        "serial_s_per_rank": [round(serial_small, 3), round(serial_big, 2), round(serial_200, 1)],
        "worker_s_per_rank": [round(small_s, 3), round(big_s, 2), round(worker_200, 1)],
        "worker_s_per_rank_8_per_task": round(batched_s, 3),
        "summary_kb_per_rank": [round(small_bytes / 1e3, 1), round(big_bytes / 1e3, 1), round(bytes_200 / 1e3)],
        "1024_ranks_x_200_mb": {
            "serial_one_process_h": round(1024 * serial_200 / 3600, 2),
            "workers_2_h": round(1024 * worker_200 / 2 / 3600, 2),
            "workers_64_min": round(1024 * worker_200 / 64 / 60, 1),
            "client_base_mb": round(base_mb),
            "client_summaries_gb": round(1024 * bytes_200 / 1e9, 2)}}, indent=1))

if __name__ == "__main__":
    main()

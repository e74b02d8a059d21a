"""MFU, HFU, MBU of a report, from the analyses under analyses/efficiency/ (the FLOP and byte model per aten op, the
peak table): what ``Report.efficiency`` and the headline carry (the operator view, ``Report.operators``, is the
view efficiency_report_operators, tracedoc.report_tables).

The figures are measured only for the inputs of a format that gives operator shapes (tracedoc/formats.py: PyTorch
traces), or for any trace with steps when the user gives ``--flops-per-step``; elsewhere the report has no
efficiency section.
"""

from __future__ import annotations

from typing import Any

from tracedoc.formats import BY_NAME, giving
from tracedoc.measures import MS, PCT
from tracedoc.options import Peaks
from tracedoc.store import Store
from tracedoc.units import fmt_fixed, fmt_pct, fmt_range, report_number


def set_peaks(store: Store, peaks: Peaks) -> None:
    """Set the given values as the store's SQL variables (efficiency.peaks and efficiency.steps read them), before
    the analyses run."""
    for name, value in peaks.given().items():
        store.set_variable(name, value)


_STEPS_SQL = """
    SELECT e.*, src.format FROM {table} e JOIN sources src USING (source_id)
    WHERE src.format IN (SELECT format FROM input_formats WHERE operator_shapes) OR ?
    ORDER BY e.rank, e.source_id{order}"""


def efficiency_rows(store: Store, options: Peaks | None = None) -> list[dict[str, Any]]:
    """The report's ``efficiency``: per rank, one row over its steady steps (step None) and one per step, with
    the peak and its source; a figure that cannot be computed is None and ``note`` says why (a PyTorch trace
    without shapes: one row per rank, saying so)."""
    rows = _rows_of(store, options)
    if rows is None:
        return []
    if rows == "unavailable":
        return _unavailable(store, options)
    user = bool(options and options.user_flops)
    store.include("efficiency.steps")
    ranks = store.query(_STEPS_SQL.format(table="efficiency_by_rank", order=""), [user])
    steps = store.query(_STEPS_SQL.format(table="efficiency_steps", order=", e.step"), [user])
    unprofiled = _unprofiled(store)
    given = options.step_time_ms if options else None
    # a rank without shapes: one row saying so, as where no rank has any (_unavailable)
    return ([{**_row(r, None), **_run_time(unprofiled.get(r["source_id"]), r, given)} for r in ranks]
            + [_row(r, r["step"]) for r in steps if r["note"] not in _NOTES])


def modules_read(store: Store, options: Peaks | None = None) -> list[str]:
    """The analysis modules ``efficiency_rows`` reads on this store, so that they can be started before it asks."""
    rows = _rows_of(store, options)
    if rows is None:
        return []
    return ["efficiency.steps", "efficiency.observer"] if rows == "measured" else list(_UNAVAILABLE_READS)


def _rows_of(store: Store, options: Peaks | None) -> str | None:
    """What ``efficiency_rows`` gives on this store: 'measured' figures; 'unavailable' rows saying why there are
    none (no operator shapes, of a format that can give them or whose profiler's cost is modelled: Nsight
    Systems, its rows with the step without the profiler); None: no rows."""
    if store.formats().isdisjoint(giving("operator_shapes")) and not (options and options.user_flops):
        return "unavailable" if not store.formats().isdisjoint(giving("profiler_k")) else None
    return "measured" if store.applies("efficiency.steps") else "unavailable"


_UNAVAILABLE_READS = ("trace.steps", "efficiency.peaks", "efficiency.observer")


def _unprofiled(store: Store) -> dict[int, dict[str, Any]]:
    """Per source: efficiency.observer's estimate of the step without the profiler."""
    store.include("efficiency.observer")
    return {r["source_id"]: r for r in store.query("SELECT * FROM efficiency_observer")}


def _run_time(observed: dict[str, Any] | None, row: dict[str, Any], given: float | None) -> dict[str, Any]:
    """A rank row's ``step_time_source`` ('trace', or '--step-time-ms' when the user gave it: MFU and MBU divide
    by it) and ``unprofiled``: the profiled step beside the estimate of the run without the profiler
    (efficiency.observer), with MFU and MBU at the estimate and at its range's ends; None where no estimate
    exists (no launch calls, no steps)."""
    source = {"step_time_source": "--step-time-ms" if given is not None else "trace"}
    if observed is None:
        return {**source, "unprofiled": None}
    n = report_number
    ms = lambda key: n(observed[key] / 1e6)  # noqa: E731
    unprofiled: dict[str, Any] = {
        "traced_step_ms": ms("traced_ns"), "step_ms": ms("unprofiled_ns"), "step_ms_low": ms("unprofiled_low_ns"),
        "step_ms_high": ms("unprofiled_high_ns"), "gpu_floor_ms": ms("floor_ns"),
        "profiler_cost_ms": ms("profiler_cost_ns"), "host_events_per_step": n(observed["host_events"]),
        "critical_events_per_step": n(observed["critical_events"]), "event_cost_us": n(observed["event_cost_ns"] / 1e3),
        "recorded_with": [o for o in ("shapes", "stacks", "memory", "nsys") if observed[o]],
        "gpu_paced": bool(observed["gpu_paced"])}
    step_ns = row["step_ns"] / max(row.get("steps") or 1, 1) if row.get("step_ns") else None
    for figure in ("mfu_pct", "mbu_pct"):  # the figure's work over the unprofiled step: high step, low figure
        for suffix, key in (("", "unprofiled_ns"), ("_low", "unprofiled_high_ns"), ("_high", "unprofiled_low_ns")):
            unprofiled[figure + suffix] = _at_step(row.get(figure), step_ns, observed[key], given)
    return {**source, "unprofiled": unprofiled}


def _at_step(value: float | None, step_ns: float | None, other_ns: float | None, given: float | None) -> Any:
    """A figure measured over ``step_ns`` as it reads over ``other_ns`` (None with --step-time-ms: the figure is
    at the user's step already)."""
    if value is None or not step_ns or not other_ns or given is not None:
        return None
    return report_number(value * step_ns / other_ns)


def _unavailable(store: Store, options: Peaks | None) -> list[dict[str, Any]]:
    """One row per rank with steady steps whose trace holds no operator shapes, of a format that can give them
    (PyTorch) or whose profiler's cost is modelled (Nsight Systems): null figures, the peak its GPU would have, why
    (CUDA graphs, record_shapes off, a capture without operators), and the step without the profiler."""
    for module in _UNAVAILABLE_READS:
        store.include(module)
    rows = store.query("""
        WITH graphs AS (SELECT DISTINCT source_id FROM cpu_activity
                        WHERE kind IN ('runtime', 'driver') AND name LIKE '%GraphLaunch%'),
        steps AS (SELECT source_id, count(*) AS steps FROM trace_steady_steps GROUP BY source_id)
        SELECT src.source_id, src.rank, src.format, s.steps, p.gpu, p.device_name, p.source AS peak_source,
               p.bf16_tflops, p.hbm_gbps, g.source_id IS NOT NULL AS graphs,
               CASE WHEN o.source_id IS NOT NULL THEN o END AS observed  -- not a row of NULLs where none joined
        FROM steps s JOIN sources src USING (source_id) LEFT JOIN efficiency_peaks p USING (source_id)
        LEFT JOIN graphs g USING (source_id) LEFT JOIN efficiency_observer o USING (source_id)
        WHERE src.format IN (SELECT format FROM input_formats WHERE operator_shapes OR profiler_k IS NOT NULL)
        ORDER BY src.rank, src.source_id""")
    return [{"rank": r["rank"], "step": None, "steps": r["steps"], **_NONE,
             "peak": {"gpu": r["gpu"], "device_name": r["device_name"], "dtype": "bf16",
                      "tflops": report_number(r["bf16_tflops"]), "gbps": report_number(r["hbm_gbps"]),
                      "source": r["peak_source"]},
             "note": (NO_OPERATORS_NOTE if not BY_NAME[r["format"]].operator_shapes else GRAPHS_NOTE if r["graphs"]
                      else NO_SHAPES_NOTE),
             **_run_time(r["observed"], {}, options.step_time_ms if options else None)}
            for r in rows]


GRAPHS_NOTE = ("the steps run in CUDA graphs: their operators and shapes are not in the trace (give "
               "--flops-per-step)")
NO_SHAPES_NOTE = "the trace has no operator shapes (record with record_shapes=True, or give --flops-per-step)"
NO_OPERATORS_NOTE = "an Nsight Systems capture has no operator shapes (give --flops-per-step or --bytes-per-step)"
_NOTES = (GRAPHS_NOTE, NO_SHAPES_NOTE)  # efficiency.steps words them alike
_NONE = dict.fromkeys(("step_ms", "model_flops", "hardware_flops", "achieved_tflops", "mfu_pct", "hfu_pct", "bytes",
                       "achieved_gbps", "mbu_pct", "flop_model_coverage_pct", "bound"))


def _row(r: dict[str, Any], step: int | None) -> dict[str, Any]:
    """One row of ``efficiency``; a rank's row (step None) gives the mean step of its steady steps."""
    n = report_number
    steps = r.get("steps", 1)
    if r["note"] in _NOTES:
        return {"rank": r["rank"], "step": None, "steps": steps, **_NONE,
                "peak": {"gpu": r["gpu"], "device_name": r["device_name"], "dtype": r["dtype"],
                         "tflops": n(r["peak_tflops"]), "gbps": n(r["peak_gbps"]), "source": r["peak_source"]},
                "note": r["note"]}
    per_step = lambda v: None if v is None else n(v / steps)  # noqa: E731
    return {"rank": r["rank"], "step": step, "steps": steps,
            "step_ms": n(r["step_ns"] / 1e6 / steps) if r["step_ns"] else None,
            "model_flops": per_step(r["model_flops"]), "hardware_flops": per_step(r["hardware_flops"]),
            "achieved_tflops": n(r["achieved_tflops"]), "mfu_pct": n(r["mfu_pct"]), "hfu_pct": n(r["hfu_pct"]),
            "bytes": per_step(r["bytes"]), "achieved_gbps": n(r["achieved_gbps"]), "mbu_pct": n(r["mbu_pct"]),
            "flop_model_coverage_pct": n(r["coverage_pct"]), "bound": r["bound"], "workload": r["workload"],
            "peak": {"gpu": r["gpu"], "device_name": r["device_name"], "dtype": r["dtype"],
                     "tflops": n(r["peak_tflops"]), "gbps": n(r["peak_gbps"]), "source": r["peak_source"]},
            "note": r["note"]}


def headline(rows: list[dict[str, Any]]) -> str | None:
    """The headline's words for the efficiency rows: 'MFU 53.9% of NVIDIA H200 SXM bf16 dense' (the ranks' mean
    over their steady steps), or why it is unavailable; None without rows. A training step (one with a backward
    pass) is judged by its MFU, with its MBU beside it, however memory-bound its ops are; an inference step that is
    memory-bound (decode) by its MBU. The figure is the profiled step's; where the profiler cost the step 5 % or
    more, the estimate without it follows (efficiency.observer), and with --step-time-ms the figure is at the given
    step time, as the words say."""
    ranks = [r for r in rows if r["step"] is None]
    if not ranks:
        return None
    known = [r for r in ranks if r["note"] is None]
    if not known:  # the reason, without its advice (the Efficiency section gives it)
        if all(r["note"] == NO_OPERATORS_NOTE for r in ranks) and not _unprofiled_step_words(ranks):
            return None  # an Nsight Systems capture whose profiler cost little: nothing to head with
        return f"MFU unavailable: {str(ranks[0]['note']).split(' (')[0]}{_unprofiled_step_words(ranks)}"
    peak = known[0]["peak"]
    given = str(peak["source"] or "").startswith("--peak-")
    gpu = "the given peak" if given or not (peak["gpu"] or peak["device_name"]) else peak["gpu"] or peak["device_name"]
    mean = lambda key: sum(float(r[key] or 0) for r in known) / len(known)  # noqa: E731
    training = any(r.get("workload") == "training" for r in known)
    if all(r["mfu_pct"] is None for r in known):  # only --bytes-per-step given: no FLOPs to divide
        figure, words = "mbu_pct", f"MBU {fmt_pct(mean('mbu_pct'))} of {gpu} HBM bandwidth (MFU needs --flops-per-step)"
    elif not training and all(r["bound"] == "memory" for r in known):
        figure, words = "mbu_pct", f"MBU {fmt_pct(mean('mbu_pct'))} of {gpu} HBM bandwidth"
    else:
        hfu = f" (HFU {fmt_pct(mean('hfu_pct'))})" if any(r["hfu_pct"] is not None for r in known) else ""
        mbu = f", MBU {fmt_pct(mean('mbu_pct'))} of its HBM bandwidth" if training and any(
            r["mbu_pct"] is not None for r in known) else ""
        figure, words = "mfu_pct", f"MFU {fmt_pct(mean('mfu_pct'))} of {gpu} {peak['dtype']} dense{hfu}{mbu}"
    if any(r.get("step_time_source") == "--step-time-ms" for r in known):
        return f"{words} at the given {fmt_fixed(mean('step_ms'), MS, 2)} step"
    return words + _unprofiled_figure_words(known, figure)


def _costly(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows' unprofiled estimates where the profiler cost their step 5 % or more (else none)."""
    found = [r["unprofiled"] for r in rows if r.get("unprofiled")]
    if len(found) < len(rows) or not found:
        return []
    costly = any((u["profiler_cost_ms"] or 0) >= 0.05 * (u["traced_step_ms"] or 0) for u in found)
    return found if costly else []


def _unprofiled_figure_words(rows: list[dict[str, Any]], figure: str) -> str:
    """'; profiled 27.32 ms step; without the profiler about 8.3% (6.5–37.3%)', the ranks' means."""
    found = _costly(rows)
    if not found or any(u[figure] is None for u in found):
        return ""
    mean = lambda key: sum(float(u[key] or 0) for u in found) / len(found)  # noqa: E731
    return (f" in the profiled {fmt_fixed(mean('traced_step_ms'), MS, 2)} step; without the profiler about "
            f"{fmt_pct(mean(figure))} ({fmt_range(mean(figure + '_low'), mean(figure + '_high'), PCT)})")


def _unprofiled_step_words(rows: list[dict[str, Any]]) -> str:
    """'; step 51.69 ms profiled, about 23.97 ms without the profiler (3.60–36.57 ms)', the ranks' means."""
    found = _costly(rows)
    if not found:
        return ""
    mean = lambda key: sum(float(u[key] or 0) for u in found) / len(found)  # noqa: E731
    return (f"; step {fmt_fixed(mean('traced_step_ms'), MS, 2)} profiled, about {fmt_fixed(mean('step_ms'), MS, 2)} "
            f"without the profiler ({fmt_range(mean('step_ms_low'), mean('step_ms_high'), MS, 2)})")

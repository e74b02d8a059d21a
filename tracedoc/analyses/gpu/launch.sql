-- gpu.launch: kernel launch statistics per device.
--
-- Launch latency is the time from the host's launch call (cudaLaunchKernel, cudaGraphLaunch, hipLaunchKernel,
-- hipExtModuleLaunchKernel, hipGraphLaunch, ...: the runtime call with the kernel's correlation id) to the
-- kernel's start on the GPU. A tiny kernel runs under 10 µs: shorter than it takes the host to launch the next
-- one, so a stream of them leaves the GPU waiting on the CPU. Times in ns.
-- include: gpu.idle
-- include: trace.framework
-- include: efficiency.observer

-- Launch statistics per device: kernels, kernels per profiler step, median kernel duration (ns), share of tiny
-- kernels (%), median and 90th-percentile launch latency (ns), and how many kernels came from CUDA or HIP graphs
-- (launched by cudaGraphLaunch or hipGraphLaunch).
CREATE OR REPLACE TEMP TABLE gpu_launch_stats AS
WITH k AS (
    SELECT w.source_id, w.rank, w.device, w.dur_ns, w.ts_ns - c.ts_ns AS launch_latency_ns,
           c.name AS launch_call
    FROM gpu_work w
    LEFT JOIN cpu_activity c ON c.source_id = w.source_id AND c.correlation_id = w.correlation_id
                             AND c.kind IN ('runtime', 'driver')
    WHERE w.kind = 'kernel'
)
SELECT k.source_id, k.rank, k.device,
       count(*) AS kernel_count,
       count(*) / nullif(any_value(t.step_count), 0) AS kernels_per_step,
       median(k.dur_ns) AS median_kernel_ns,
       100.0 * count(*) FILTER (WHERE k.dur_ns < 10000) / count(*) AS tiny_kernel_pct,
       median(k.launch_latency_ns) AS median_launch_latency_ns,
       quantile_cont(k.launch_latency_ns, 0.9) AS p90_launch_latency_ns,
       count(*) FILTER (WHERE k.launch_call ILIKE '%GraphLaunch%') AS graph_kernel_count
FROM k JOIN trace_wall t USING (source_id)
GROUP BY k.source_id, k.rank, k.device;

-- Launch statistics beside the idle time they explain, per device: every column of gpu_idle_by_device and of
-- gpu_launch_stats, and fix_text: the advice, in PyTorch's APIs where the trace is of a PyTorch program
-- (trace.framework), else in CUDA's. Launch-bound work shows as much short host-wait idle between many tiny kernels.
-- From efficiency.observer (PyTorch traces): profiler_idle_ns, what the profiler's own bookkeeping may cost of the
-- short idle (its cost over the steady steps, at most that idle), profiler_idle_pct (its share, %),
-- unprofiled_step_ns and traced_step_ns (the step without the profiler, estimated, and as traced) and
-- unprofiled_idle_pct (the share of that step the GPU would idle: efficiency.observer's). NULL elsewhere.
CREATE OR REPLACE TEMP VIEW gpu_launch_overhead AS
SELECT i.*, l.kernel_count, l.kernels_per_step, l.median_kernel_ns, l.tiny_kernel_pct,
       l.median_launch_latency_ns, l.p90_launch_latency_ns, l.graph_kernel_count,
       CASE WHEN o.profiler_cost_sum_ns IS NOT NULL  -- least() would pass the idle for a missing estimate
            THEN least(o.profiler_cost_sum_ns, i.host_wait_short_ns) END AS profiler_idle_ns,
       CASE WHEN o.profiler_cost_sum_ns IS NOT NULL
            THEN 100.0 * least(o.profiler_cost_sum_ns, i.host_wait_short_ns) / nullif(i.host_wait_short_ns, 0) END AS profiler_idle_pct,
       o.unprofiled_ns AS unprofiled_step_ns, o.traced_ns AS traced_step_ns, o.unprofiled_idle_pct,
       CASE WHEN coalesce(f.pytorch, true)
            THEN 'Launch fewer, larger pieces of work: capture the steady-state step in a CUDA graph '
                 || '(torch.cuda.CUDAGraph / torch.compile(mode="reduce-overhead")) so one launch replays all its '
                 || 'kernels, fuse small ops with torch.compile, and increase the batch size where the model allows.'
            ELSE 'Launch fewer, larger pieces of work: capture the steady-state step in a CUDA graph '
                 || '(cudaStreamBeginCapture … cudaGraphLaunch) so one launch replays all its kernels, fuse small '
                 || 'kernels, and increase the batch size where the model allows.'
       END AS fix_text
FROM gpu_idle_by_device i JOIN gpu_launch_stats l USING (source_id, rank, device)
LEFT JOIN trace_framework f USING (source_id)
LEFT JOIN efficiency_observer o USING (source_id);

-- The report's launch statistics per device (gpu_launch_stats; durations and latencies in µs). Columns: rank,
-- device, kernel_count, kernels_per_step, median_kernel_us, tiny_kernel_pct, median_launch_latency_us,
-- p90_launch_latency_us, graph_kernel_count.
CREATE OR REPLACE TEMP VIEW gpu_report_launch AS
SELECT rank, device, kernel_count, kernels_per_step, median_kernel_ns / 1e3 AS median_kernel_us,
       tiny_kernel_pct, median_launch_latency_ns / 1e3 AS median_launch_latency_us,
       p90_launch_latency_ns / 1e3 AS p90_launch_latency_us, graph_kernel_count
FROM gpu_launch_stats;

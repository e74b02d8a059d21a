-- ncu.links: Nsight Compute kernels linked to the same kernels in a timeline given with the report.
--
-- ncu profiles a few launches of each kernel; a timeline (PyTorch profiler trace or Nsight Systems report of the
-- same program) says how often and how long each kernel runs. A kernel of the report is linked to the timeline's
-- kernels of the same function and launch configuration: the same demangled name and the same grid and block
-- ('x,y,z'). The tools spell one demangled name differently (nsys `<(int)4, …, (unsigned long)2>`, the PyTorch
-- profiler `<4, …, 2ul>` with `{lambda()#1}` and full parameter types, ncu without some namespaces), so names are
-- compared in one form: no namespaces, return types, integer casts or suffixes, whitespace or parameter list, and
-- one spelling of lambdas. A link means the same code with the same launch shape, not the same problem size:
-- a persistent GEMM launches as many blocks as the GPU has SMs whatever the matrices. Times in ns.
-- reads: ncu_kernels
-- scope: job
-- include: ncu.launches

-- ncu_kernel_name_form(name): a demangled kernel name in that one form, parameter list included (ncu_link_names
-- drops it), e.g. 'void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>, …>(…)'
-- → 'vectorized_elementwise_kernel<4,FillFunctor<float>,…>(…)'. Lambdas read 'lambda[float]#1' and the parameters
-- of the functions that enclose them '{}' (the profiler writes their types, nsys and ncu template parameters), so
-- that only the kernel's own parameter list is left in parentheses.
CREATE OR REPLACE TEMP MACRO ncu_kernel_name_form(n) AS
    regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(
    regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(n,
        '\bvoid\s+', '', 'g'),                                                     -- return types
        '\((?:anonymous|unnamed) namespace\)::|<unnamed>::', '', 'g'),
        'operator\s*\(\)', 'operator_call', 'g'),
        '\{lambda\(([^(){}]*)\)#(\d+)\}', 'lambda[\1]#\2', 'g'),                   -- gcc: {lambda(float)#1}
        '\[lambda\(([^()\[\]]*)\) \(instance (\d+)\)\]', 'lambda[\1]#\2', 'g'),    -- nsys, ncu: [lambda(float) (instance 1)]
        '\((?:unsigned |signed )?(?:int|long|long long|short|char|bool)\)\s*(-?\d)', '\1', 'g'),  -- (int)4
        '\b(\d+)(?:ull|ul|ll|u|l)\b', '\1', 'g'),                                  -- 2ul
        '\bfalse\b', '0', 'g'),
        '\btrue\b', '1', 'g'),
        '\([^()]*\)(?:\s*const)?\s*::', '{}::', 'g'),                              -- enclosing functions' parameters,
        '\([^()]*\)(?:\s*const)?\s*::', '{}::', 'g'),                              -- one level of nesting
        '[A-Za-z_]\w*::', '', 'g'),                                                -- namespaces and classes
        '\s+', '', 'g');

-- One row per timeline source and kernel (name, grid, block) whose launch configuration some profiled ncu kernel
-- has: launches, total_ns (Σ durations). Timeline kernels of other configurations cannot link and are skipped.
CREATE OR REPLACE TEMP TABLE ncu_link_timeline AS
WITH configs AS (SELECT DISTINCT grid, block FROM ncu_kernel_metrics WHERE grid IS NOT NULL AND block IS NOT NULL)
SELECT g.source_id, g.name, g.grid, g.block, count(*) AS launches, sum(g.dur_ns) AS total_ns
FROM gpu_activity g
JOIN configs c ON c.grid = g.grid AND c.block = g.block
WHERE g.kind = 'kernel'
GROUP BY g.source_id, g.name, g.grid, g.block;

-- One row per name to compare (ncu's demangled names and those timeline names): kernel_key, the name's form up to
-- its parameter list (the first '(' outside template arguments and brackets; the whole form when it has none).
CREATE OR REPLACE TEMP TABLE ncu_link_names AS
WITH names AS (
    SELECT DISTINCT name FROM ncu_link_timeline
    UNION SELECT DISTINCT coalesce(nullif(demangled_name, ''), name) FROM ncu_kernel_metrics
),
forms AS (SELECT name, ncu_kernel_name_form(name) AS form FROM names WHERE name IS NOT NULL),
ids AS (SELECT form, row_number() OVER () AS id FROM (SELECT DISTINCT form FROM forms)),
-- One row per character (of the first 8192: the parameter list of a real name starts well before), carrying the
-- form's id and not the form itself, so the rows grow with the name's length, not with its square.
chars AS (
    SELECT id, unnest(range(1, least(length(form), 8192) + 1)) AS i,
           unnest(string_split(left(form, 8192), '')) AS c
    FROM ids
),
depth AS (
    SELECT id, i, c,
           sum(CASE WHEN c IN ('<', '(', '[', '{') THEN 1 WHEN c IN ('>', ')', ']', '}') THEN -1 ELSE 0 END)
               OVER (PARTITION BY id ORDER BY i)
           - CASE WHEN c IN ('<', '(', '[', '{') THEN 1 ELSE 0 END AS depth_before
    FROM chars
),
cuts AS (
    SELECT id, min(i) FILTER (WHERE c = '(' AND depth_before = 0 AND i > 1) AS params_at FROM depth GROUP BY id
)
SELECT f.name, CASE WHEN cuts.params_at IS NULL THEN f.form ELSE left(f.form, cuts.params_at - 1) END AS kernel_key
FROM forms f JOIN ids USING (form) LEFT JOIN cuts USING (id);

-- One row per ncu kernel (as in ncu_kernel_metrics: source, demangled name, grid, block): its identity, launches,
-- total_ns and mean_ns as profiled; kernel_key; what the timeline holds of it: timeline_sources (timeline inputs
-- that ran it), timeline_launches and timeline_total_ns (Σ over them; 0 and NULL when unlinked), timeline_mean_ns
-- (per launch), timeline_name (one of its names there); and per timeline input (ranks run side by side, so one
-- input's share is what the job spends): launches_per_timeline, ns_per_timeline, and impact_scale =
-- ns_per_timeline / total_ns, what turns a saving estimated on the profiled launches into one over the timeline
-- (NULL when unlinked).
CREATE OR REPLACE TEMP TABLE ncu_trace_links AS
WITH t AS (
    SELECT l.source_id AS timeline_source_id, n.kernel_key, l.grid, l.block, any_value(l.name) AS timeline_name,
           sum(l.launches) AS launches, sum(l.total_ns) AS total_ns
    FROM ncu_link_timeline l JOIN ncu_link_names n USING (name)
    GROUP BY l.source_id, n.kernel_key, l.grid, l.block
),
k AS (
    SELECT m.source_id, m.rank, m.name, m.demangled_name, m.grid, m.block, m.launches, m.total_ns, m.mean_ns,
           n.kernel_key
    FROM ncu_kernel_metrics m
    LEFT JOIN ncu_link_names n ON n.name = coalesce(nullif(m.demangled_name, ''), m.name)
),
linked AS (
    SELECT k.source_id, k.rank, k.name, k.demangled_name, k.grid, k.block, k.launches, k.total_ns, k.mean_ns,
           k.kernel_key, count(t.timeline_source_id) AS timeline_sources,
           coalesce(sum(t.launches), 0) AS timeline_launches, sum(t.total_ns) AS timeline_total_ns,
           any_value(t.timeline_name) AS timeline_name
    FROM k
    LEFT JOIN t ON t.kernel_key = k.kernel_key AND t.grid = k.grid AND t.block = k.block
    GROUP BY ALL
)
SELECT *, timeline_total_ns / nullif(timeline_launches, 0) AS timeline_mean_ns,
       timeline_launches / nullif(timeline_sources, 0) AS launches_per_timeline,
       timeline_total_ns / nullif(timeline_sources, 0) AS ns_per_timeline,
       timeline_total_ns / nullif(timeline_sources, 0) / nullif(total_ns, 0) AS impact_scale
FROM linked;

-- The report's ncu kernels found in a timeline given with the report (ncu_trace_links: the same demangled name,
-- grid and block). Columns: rank, kernel, grid, block, launches, total_ms, timeline_sources, timeline_launches,
-- timeline_total_ms, timeline_mean_us, impact_scale, timeline_name; timeline_total_ns orders the rows and is left
-- out of the report.
CREATE OR REPLACE TEMP VIEW ncu_report_trace_links AS
SELECT rank, name AS kernel, grid, block, launches, total_ns / 1e6 AS total_ms, timeline_sources,
       timeline_launches, timeline_total_ns / 1e6 AS timeline_total_ms, timeline_mean_ns / 1e3 AS timeline_mean_us,
       impact_scale, timeline_name, timeline_total_ns
FROM ncu_trace_links WHERE timeline_launches > 0;

-- efficiency.shares: per source, the share of its steps' operator GPU time that the GPU floor keeps
-- (efficiency.floor): the roofline's share of each modelled op's time, but never under its launches × the
-- shortest kernel the GPU ran in the trace, nor above the time it took; and the whole time of ops without a model.
-- Made only where the operators are modelled (a trace with shapes, or a user's FLOPs or bytes per step).
-- One row per source: source_id, share (0–1).
-- include: efficiency.operators

-- efficiency_floor_shares: per source, the share of its steps' op GPU time that is the roofline's (or unmodelled,
-- so kept whole): one rank's own, handed to a distributed run's client (scale.exports), which has no operators.
CREATE OR REPLACE TEMP TABLE efficiency_floor_shares AS
WITH launched AS (  -- each op's launches in the steady steps × the trace's shortest kernel
    SELECT k.source_id, k.op, sum(k.launches) * any_value(l.kernel_ns) AS launch_floor_ns
    FROM efficiency_operator_kernels k
    JOIN (SELECT source_id, min(dur_ns) AS kernel_ns FROM efficiency_launches WHERE kind = 'kernel' AND dur_ns > 0
          GROUP BY source_id) l USING (source_id)
    GROUP BY k.source_id, k.op
)
SELECT o.source_id,
       sum(CASE WHEN o.kind IS NOT NULL AND o.roofline_pct IS NOT NULL
                THEN least(greatest(o.gpu_ns * least(o.roofline_pct, 100.0) / 100.0, coalesce(l.launch_floor_ns, 0)),
                           o.gpu_ns)
                ELSE o.gpu_ns END)
           / nullif(sum(o.gpu_ns), 0) AS share
FROM efficiency_operators o LEFT JOIN launched l USING (source_id, op) GROUP BY o.source_id;

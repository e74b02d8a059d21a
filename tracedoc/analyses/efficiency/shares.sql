-- efficiency.shares: per source, the share of its steps' operator GPU time that the GPU floor keeps
-- (efficiency.floor): the roofline's share of each modelled op's time, and the whole time of ops without a model.
-- Made only where the operators are modelled (a trace with shapes, or a user's FLOPs or bytes per step).
-- One row per source: source_id, share (0–1).
-- include: efficiency.operators

-- efficiency_floor_shares: per source, the share of its steps' op GPU time that is the roofline's (or unmodelled,
-- so kept whole): one rank's own, handed to a distributed run's client (scale.exports), which has no operators.
CREATE OR REPLACE TEMP TABLE efficiency_floor_shares AS
SELECT source_id,
       sum(CASE WHEN kind IS NOT NULL AND roofline_pct IS NOT NULL
                THEN gpu_ns * least(roofline_pct, 100.0) / 100.0 ELSE gpu_ns END)
           / nullif(sum(gpu_ns), 0) AS share
FROM efficiency_operators GROUP BY source_id;


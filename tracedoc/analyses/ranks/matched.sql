-- ranks.matched: the collectives matched across ranks (ranks.collectives' ranks_collectives) for the modules that
-- read them: the attribution's waits for later ranks, the exposed communication's waits for peers, the rank × step
-- table and the all-to-all load. ranks.collectives runs only where the store holds communication kernels;
-- elsewhere (a trace of one GPU, say) the table is made here, empty, with its columns, so that the readers find no
-- collective without its nine statements being planned. One module makes it, so that readers run at once on
-- cursors (store.pool) never make it twice.
-- uses: ranks.collectives

-- ranks_collectives (ranks.collectives, see its columns there) where the store holds communication kernels;
-- elsewhere empty.
CREATE TEMP TABLE IF NOT EXISTS ranks_collectives (
    source_id INTEGER, rank INTEGER, device INTEGER, stream BIGINT, name VARCHAR, ts_ns BIGINT, end_ns BIGINT,
    dur_ns BIGINT, correlation_id BIGINT, launch_ts_ns BIGINT, collective VARCHAR, pg_name VARCHAR, dtype VARCHAR,
    in_nelems BIGINT, out_nelems BIGINT, in_splits VARCHAR, out_splits VARCHAR, step INTEGER, channel VARCHAR,
    k BIGINT, instance BIGINT, ref_source_id INTEGER, offset_ns BIGINT, arrival_ns BIGINT, first_arrival_ns BIGINT,
    last_arrival_ns BIGINT, ranks BIGINT, names_agree BOOLEAN, instance_step INTEGER, is_last BOOLEAN,
    wait_ns BIGINT, lateness_ns BIGINT, blocked_ns BIGINT, exposed_wait_ns HUGEINT, blocked_exposed_ns DOUBLE);

-- health.ecc: ECC memory errors of each GPU of each NVML snapshot, split into what needs action now and history.
-- include: health.gpus
--
-- Volatile counters count since the driver loaded; aggregate ones over the GPU's life. Hopper and Ampere GPUs
-- replace a memory row that had errors by a spare one (row remapping, applied at the next GPU reset); older
-- ones retire the page. After a successful remap and reset the memory is sound again, so lifetime counts alone
-- are history, not a fault.

-- One row per snapshot GPU (NVML answered at least one ECC query). Columns: source_id, rank, device, name, the
-- ECC counters and remap/retirement fields of gpu_health, and
--   needs_action: uncorrected errors since the driver loaded, a remap or retirement waiting for a reset, or a
--                 remap that failed: the memory is not trustworthy until the GPU is reset or replaced;
--   issues:       the conditions that hold, in words.
CREATE OR REPLACE TEMP VIEW health_ecc AS
WITH e AS (
    SELECT source_id, rank, device, name, ecc_enabled, ecc_pending_enabled,
           ecc_volatile_corrected, ecc_volatile_uncorrected, ecc_aggregate_corrected, ecc_aggregate_uncorrected,
           retired_pages_sbe, retired_pages_dbe, retired_pages_pending,
           remapped_rows_corrected, remapped_rows_uncorrected, remap_pending, remap_failed
    FROM health_gpus
    WHERE nvml_error IS NULL AND coalesce(ecc_volatile_uncorrected, ecc_aggregate_uncorrected,
                                          remapped_rows_uncorrected, retired_pages_dbe) IS NOT NULL
)
SELECT *,
       coalesce(ecc_volatile_uncorrected > 0, false) OR coalesce(remap_pending, false)
           OR coalesce(remap_failed, false) OR coalesce(retired_pages_pending, false) AS needs_action,
       concat_ws('; ',
           CASE WHEN ecc_volatile_uncorrected > 0
                THEN ecc_volatile_uncorrected || ' uncorrected ECC error'
                     || CASE WHEN ecc_volatile_uncorrected = 1 THEN '' ELSE 's' END
                     || ' since the driver loaded' END,
           CASE WHEN remap_pending THEN 'a row remap is pending (applied at the next GPU reset)' END,
           CASE WHEN remap_failed THEN 'a row remap failed (no spare rows left)' END,
           CASE WHEN retired_pages_pending THEN 'a page retirement is pending (applied at the next reset)' END,
           CASE WHEN ecc_aggregate_uncorrected > 0
                THEN ecc_aggregate_uncorrected || ' uncorrected ECC error'
                     || CASE WHEN ecc_aggregate_uncorrected = 1 THEN '' ELSE 's' END
                     || ' over the GPU''s life' END,
           CASE WHEN remapped_rows_uncorrected > 0
                THEN remapped_rows_uncorrected || CASE WHEN remapped_rows_uncorrected = 1 THEN ' row' ELSE ' rows' END
                     || ' remapped after uncorrectable errors' END,
           CASE WHEN retired_pages_dbe > 0
                THEN retired_pages_dbe || CASE WHEN retired_pages_dbe = 1 THEN ' page' ELSE ' pages' END
                     || ' retired after double-bit errors' END,
           CASE WHEN ecc_volatile_corrected > 0
                THEN ecc_volatile_corrected || ' corrected ECC error'
                     || CASE WHEN ecc_volatile_corrected = 1 THEN '' ELSE 's' END
                     || ' since the driver loaded' END
       ) AS issues
FROM e;

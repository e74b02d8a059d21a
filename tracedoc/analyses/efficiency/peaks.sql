-- efficiency.peaks: the chip's dense peaks that MFU and MBU divide by, chosen from each trace's device name.
--
-- efficiency_peak_table holds NVIDIA's datasheet figures for the datacenter GPUs users profile: dense tensor-core
-- TFLOP/s per dtype (datasheets print the 2:4-sparse figure first for TF32, BF16/FP16, FP8 and INT8; the dense one
-- is half of it) and HBM bandwidth in GB/s. FP32 is the non-tensor (CUDA-core) rate; TF32 applies where an fp32
-- product runs on tensor cores (allow_tf32: the kernel's name says tf32); FP16 has the BF16 peak on all of them.
-- The first pattern in priority order that matches the device's name wins (H200 NVL before H200, A100 80GB before
-- A100). A GPU the table lacks has no peak: MFU and MBU are NULL and the report says why, unless the user gives
-- --peak-tflops / --peak-gbps (SET VARIABLE peak_tflops / peak_gbps), which override the table for every dtype.
-- Units: TFLOP/s, GB/s (10^9 bytes/s).

CREATE OR REPLACE TEMP TABLE efficiency_peak_table AS
SELECT priority, pattern, gpu, fp32_tflops::DOUBLE AS fp32_tflops, tf32_tflops::DOUBLE AS tf32_tflops,
       bf16_tflops::DOUBLE AS bf16_tflops, fp8_tflops::DOUBLE AS fp8_tflops, int8_tflops::DOUBLE AS int8_tflops,
       hbm_gbps::DOUBLE AS hbm_gbps, source
FROM (VALUES
    (1, '(?i)\bGB200\b', 'NVIDIA GB200', 80.0, 1250.0, 2500.0, 5000.0, 5000.0, 8000.0,
     'NVIDIA GB200 NVL72 datasheet, per GPU (https://www.nvidia.com/en-us/data-center/gb200-nvl72/); sparse figures halved'),
    (2, '(?i)\bB200\b', 'NVIDIA B200', 75.0, 1100.0, 2250.0, 4500.0, 4500.0, 8000.0,
     'NVIDIA HGX B200 datasheet, per GPU (https://www.nvidia.com/en-us/data-center/hgx/); sparse figures halved'),
    (3, '(?i)\bH200 NVL\b', 'NVIDIA H200 NVL', 60.0, 417.5, 835.5, 1670.5, 1670.5, 4800.0,
     'NVIDIA H200 datasheet, NVL column (https://www.nvidia.com/en-us/data-center/h200/); sparse figures halved'),
    (4, '(?i)\bH200\b', 'NVIDIA H200 SXM', 67.0, 494.5, 989.5, 1979.0, 1979.0, 4800.0,
     'NVIDIA H200 datasheet, SXM column (https://www.nvidia.com/en-us/data-center/h200/); sparse figures halved'),
    (5, '(?i)\bH100 NVL\b', 'NVIDIA H100 NVL', 60.0, 417.5, 835.5, 1670.5, 1670.5, 3900.0,
     'NVIDIA H100 datasheet, NVL column (https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet); sparse figures halved'),
    (6, '(?i)\bH100\b.*PCIe', 'NVIDIA H100 PCIe', 51.0, 378.0, 756.0, 1513.0, 1513.0, 2000.0,
     'NVIDIA H100 datasheet, PCIe column (https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet); sparse figures halved'),
    (7, '(?i)\bH100\b', 'NVIDIA H100 SXM', 67.0, 494.5, 989.5, 1979.0, 1979.0, 3350.0,
     'NVIDIA H100 datasheet, SXM column (https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet); sparse figures halved'),
    (8, '(?i)\bH800\b.*PCIe', 'NVIDIA H800 PCIe', 51.0, 378.0, 756.0, 1513.0, 1513.0, 2000.0,
     'NVIDIA H800 PCIe datasheet (tensor rates as H100 PCIe; https://www.nvidia.com/en-us/data-center/h800/); sparse figures halved'),
    (9, '(?i)\bH800\b', 'NVIDIA H800 SXM', 67.0, 494.5, 989.5, 1979.0, 1979.0, 3350.0,
     'NVIDIA H800 SXM datasheet (tensor rates as H100 SXM; https://www.nvidia.com/en-us/data-center/h800/); sparse figures halved'),
    (10, '(?i)\bH20\b', 'NVIDIA H20', 44.0, 74.0, 148.0, 296.0, 296.0, 4000.0,
     'NVIDIA HGX H20 spec sheet (TF32 148, BF16 296, FP8 592 TFLOP/s with sparsity; FP32 44; 96 GB HBM3 at 4.0 TB/s); sparse figures halved'),
    (11, '(?i)\bA100\b.*(80GB.*PCIe|PCIe.*80GB)', 'NVIDIA A100 80GB PCIe', 19.5, 156.0, 312.0, NULL, 624.0, 1935.0,
     'NVIDIA A100 datasheet, 80GB PCIe column (https://www.nvidia.com/en-us/data-center/a100/); sparse figures halved'),
    (12, '(?i)\bA100\b.*80GB', 'NVIDIA A100 80GB SXM', 19.5, 156.0, 312.0, NULL, 624.0, 2039.0,
     'NVIDIA A100 datasheet, 80GB SXM column (https://www.nvidia.com/en-us/data-center/a100/); sparse figures halved'),
    (13, '(?i)\bA100\b', 'NVIDIA A100 40GB', 19.5, 156.0, 312.0, NULL, 624.0, 1555.0,
     'NVIDIA A100 datasheet, 40GB column (https://www.nvidia.com/en-us/data-center/a100/); sparse figures halved'),
    (14, '(?i)\bL40S\b', 'NVIDIA L40S', 91.6, 183.0, 362.05, 733.0, 733.0, 864.0,
     'NVIDIA L40S datasheet (https://www.nvidia.com/en-us/data-center/l40s/); sparse figures halved'),
    (15, '(?i)\bL4\b', 'NVIDIA L4', 30.3, 60.0, 121.0, 242.5, 242.5, 300.0,
     'NVIDIA L4 datasheet (https://www.nvidia.com/en-us/data-center/l4/); sparse figures halved'),
    (16, '(?i)\bA10\b', 'NVIDIA A10', 31.2, 62.5, 125.0, NULL, 250.0, 600.0,
     'NVIDIA A10 datasheet (https://www.nvidia.com/en-us/data-center/products/a10-gpu/); sparse figures halved')
) t(priority, pattern, gpu, fp32_tflops, tf32_tflops, bf16_tflops, fp8_tflops, int8_tflops, hbm_gbps, source);

-- One row per source: its device's name, the matched GPU (NULL: not in the table) and its peaks; user_peak says
-- that --peak-tflops / --peak-gbps override them. Columns: source_id, device_name, gpu, fp32_tflops, tf32_tflops,
-- bf16_tflops, fp8_tflops, int8_tflops, hbm_gbps, source, user_tflops, user_gbps.
CREATE OR REPLACE TEMP TABLE efficiency_peaks AS
WITH dev AS (
    SELECT s.source_id, (SELECT any_value(d.name ORDER BY d.device) FROM devices d
                         WHERE d.source_id = s.source_id AND d.name IS NOT NULL) AS device_name
    FROM sources s
)
SELECT dev.source_id, dev.device_name, p.gpu, p.fp32_tflops, p.tf32_tflops, p.bf16_tflops, p.fp8_tflops,
       p.int8_tflops, p.hbm_gbps, p.source,
       TRY_CAST(getvariable('peak_tflops') AS DOUBLE) AS user_tflops,
       TRY_CAST(getvariable('peak_gbps') AS DOUBLE) AS user_gbps
FROM dev
LEFT JOIN LATERAL (SELECT * FROM efficiency_peak_table t
                   WHERE dev.device_name IS NOT NULL AND regexp_matches(dev.device_name, t.pattern)
                   ORDER BY t.priority LIMIT 1) p ON true;

-- ncu.device_peaks: datasheet peaks of the GPUs tracedoc knows, for rooflines.
--
-- Dense throughput (no 2:4 sparsity) in TFLOP/s (TOP/s for int8) at boost clock, and DRAM bandwidth in GB/s
-- (10^9 bytes/s). fp16 covers bf16 (same rate on these parts); tensor columns are tensor/matrix-core rates, fp32 and
-- fp64 the CUDA-core (vector) rates. NULL: the part has no such unit. Where a datasheet gives only "with sparsity"
-- figures, the dense figure is half of it. A device matches the first row (lowest priority number) whose pattern
-- its name matches (ILIKE). Unknown devices fall back to what the report itself says (ncu.roofline).
-- reads: ncu_kernels
-- scope: job

-- One row per device model. Columns: model, name_pattern, priority, fp64_tflops, fp64_tensor_tflops, fp32_tflops,
-- tf32_tensor_tflops, fp16_tensor_tflops, fp8_tensor_tflops, int8_tensor_tops, dram_gbps, source (where the
-- numbers come from).
CREATE OR REPLACE TEMP TABLE ncu_device_peaks AS
SELECT * FROM (VALUES
    ('H100 SXM', '%H100%HBM3%', 10, 34.0, 67.0, 67.0, 494.7, 989.4, 1978.9, 1978.9, 3350.0,
     'NVIDIA H100 Tensor Core GPU datasheet, SXM5 column (https://www.nvidia.com/en-us/data-center/h100/)'),
    ('H100 SXM', '%H100 SXM%', 11, 34.0, 67.0, 67.0, 494.7, 989.4, 1978.9, 1978.9, 3350.0,
     'NVIDIA H100 Tensor Core GPU datasheet, SXM5 column (https://www.nvidia.com/en-us/data-center/h100/)'),
    ('H100 PCIe', '%H100%PCIe%', 12, 26.0, 51.0, 51.0, 378.0, 756.0, 1513.0, 1513.0, 2000.0,
     'NVIDIA H100 Tensor Core GPU datasheet, PCIe column (https://www.nvidia.com/en-us/data-center/h100/)'),
    ('H100 NVL', '%H100 NVL%', 13, 30.0, 60.0, 60.0, 417.5, 835.5, 1670.5, 1670.5, 3900.0,
     'NVIDIA H100 Tensor Core GPU datasheet, H100 NVL column (https://www.nvidia.com/en-us/data-center/h100/)'),
    ('H800 PCIe', '%H800%PCIe%', 20, 0.8, 0.8, 51.0, 378.0, 756.0, 1513.0, 1513.0, 2000.0,
     'NVIDIA H800 PCIe datasheet (FP64 cut to 0.8 TFLOP/s; otherwise as H100 PCIe)'),
    ('H800 SXM', '%H800%', 21, 1.0, 1.0, 67.0, 494.7, 989.4, 1978.9, 1978.9, 3350.0,
     'NVIDIA H800 SXM5 datasheet (FP64 cut to 1 TFLOP/s; otherwise as H100 SXM5; ncu reports a 64:1 FP32:FP64 ratio)'),
    ('H200 NVL', '%H200 NVL%', 30, 30.0, 60.0, 60.0, 417.5, 835.5, 1670.5, 1670.5, 4800.0,
     'NVIDIA H200 datasheet, H200 NVL column (https://www.nvidia.com/en-us/data-center/h200/)'),
    ('H200 SXM', '%H200%', 31, 34.0, 67.0, 67.0, 494.7, 989.4, 1978.9, 1978.9, 4800.0,
     'NVIDIA H200 datasheet, H200 SXM column (https://www.nvidia.com/en-us/data-center/h200/)'),
    ('A100 SXM4 80GB', '%A100%SXM%80GB%', 40, 9.7, 19.5, 19.5, 156.0, 312.0, NULL, 624.0, 2039.0,
     'NVIDIA A100 datasheet, 80GB SXM column (https://www.nvidia.com/en-us/data-center/a100/)'),
    ('A100 PCIe 80GB', '%A100%80GB%PCIe%', 41, 9.7, 19.5, 19.5, 156.0, 312.0, NULL, 624.0, 1935.0,
     'NVIDIA A100 datasheet, 80GB PCIe column (https://www.nvidia.com/en-us/data-center/a100/)'),
    ('A100 40GB', '%A100%', 42, 9.7, 19.5, 19.5, 156.0, 312.0, NULL, 624.0, 1555.0,
     'NVIDIA A100 datasheet, 40GB PCIe/SXM columns (https://www.nvidia.com/en-us/data-center/a100/)'),
    ('A40', '%NVIDIA A40', 50, 0.58, NULL, 37.4, 74.8, 149.7, NULL, 299.3, 696.0,
     'NVIDIA A40 datasheet (https://www.nvidia.com/en-us/data-center/a40/); FP64 = FP32/64'),
    ('B200', '%B200%', 60, 37.0, 37.0, 75.0, 1100.0, 2250.0, 4500.0, 4500.0, 7700.0,
     'NVIDIA HGX B200 specifications, per GPU (https://www.nvidia.com/en-us/data-center/hgx/)'),
    ('MI300X', '%MI300X%', 70, 81.7, 163.4, 163.4, 653.7, 1307.4, 2614.9, 2614.9, 5300.0,
     'AMD Instinct MI300X data sheet (https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html)')
) AS t(model, name_pattern, priority, fp64_tflops, fp64_tensor_tflops, fp32_tflops, tf32_tensor_tflops,
       fp16_tensor_tflops, fp8_tensor_tflops, int8_tensor_tops, dram_gbps, source);

"""GPU health beside traces: NVML recordings (nvml) and telemetry Parquet (telemetry), with their tables.
"""

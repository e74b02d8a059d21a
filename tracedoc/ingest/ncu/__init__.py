"""Nsight Compute: reports and CSV exports (ncu, ncu_rep, ncu_csv, ncu_model), and the GEMM ladder's cuBLAS
timings they are held against (gemm_ladder), with their tables.
"""

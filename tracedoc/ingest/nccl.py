"""Which kernels are NCCL's, as one SQL test every timeline reader uses to give a kernel the category
'communication': a name starting with ``nccl`` or holding ``ncclKernel`` / ``ncclDevKernel`` (NCCL's kernels
across its versions)."""

from __future__ import annotations


def nccl_kernel(name: str, demangled: str | None = None) -> str:
    """SQL true where the kernel named by the SQL ``name`` (and ``demangled``, its full name where a format keeps
    both: then the prefix is looked for in ``name``, the kernels' names in ``demangled``) is NCCL's. One ILIKE for
    'nccl' rules out the other kernels before the three tests (on a PyTorch trace of long names each is a pass over
    the name: 0.92x the kernels' normalisation)."""
    full = demangled or name
    holds = " OR ".join(f"{n} ILIKE '%nccl%'" for n in dict.fromkeys((name, full)))
    return (f"(({holds}) AND ({name} ILIKE 'nccl%' OR {full} ILIKE '%ncclDevKernel%' "
            f"OR {full} ILIKE '%ncclKernel%'))")

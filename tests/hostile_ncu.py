"""Many profiled kernels: samples/ncu-h200-torch-csv's CSV export (eight kernel launches) tiled into a profile of
many launches, each copy with its own launch ID and, where asked, its own kernel name."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from tests.conftest import SAMPLES

SOURCE = SAMPLES / "ncu-h200-torch-csv" / "h200_torch_gemm_softmax_full.raw.base-units.csv"


def many_kernels_csv(path: Path, kernels: int, distinct_names: bool = False) -> Path:
    """``path``: the source's header and units rows, then ``kernels`` launches cycling through its eight, numbered
    0.. in order; with ``distinct_names`` each copy of a launch names its kernel with a suffix of its copy
    (``..._c12``), so no two copies are one kernel."""
    header, units, *launches = list(csv.reader(io.StringIO(SOURCE.read_text())))
    id_col, name_col = header.index("ID"), header.index("Kernel Name")
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerows([header, units])
    for n in range(kernels):
        row = list(launches[n % len(launches)])
        row[id_col] = str(n)
        if distinct_names:
            row[name_col] = f"{row[name_col]}_c{n // len(launches)}"
        writer.writerow(row)
    path.write_text(out.getvalue())
    return path

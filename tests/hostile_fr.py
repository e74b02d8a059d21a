"""Flight-recorder dumps of many ranks: samples/hang-4rank-stuck's pickled dumps given to a larger job, rank 2's
(the rank that never issued collective #3) once and rank 0's (a rank that waits in #3) for every other rank, the
default group's members written as every rank of the job."""

from __future__ import annotations

import pickle  # noqa: S403 - the sample's own dumps, written back for the test
from pathlib import Path

from tests.conftest import SAMPLES

SOURCE = SAMPLES / "hang-4rank-stuck"
CULPRIT = 2


def many_rank_dumps(folder: Path, ranks: int) -> Path:
    """``folder`` holding trace_rank_{r} for r < ``ranks``: rank 2 the sample's culprit, the others its rank 0."""
    victim, culprit = (pickle.loads((SOURCE / f"trace_rank_{r}").read_bytes()) for r in (0, CULPRIT))  # noqa: S301
    folder.mkdir(parents=True, exist_ok=True)
    for dump in (victim, culprit):
        dump["pg_config"]["0"]["ranks"] = str(list(range(ranks)))
    victim_bytes, culprit_bytes = pickle.dumps(victim, protocol=2), pickle.dumps(culprit, protocol=2)
    for rank in range(ranks):
        (folder / f"trace_rank_{rank}").write_bytes(culprit_bytes if rank == CULPRIT else victim_bytes)
    return folder

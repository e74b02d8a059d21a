"""Every sample analysed on this machine and with ``--workers 1`` (one Dask worker process) gives the same report:
the distributed path builds the report from the same declared views as the local one, so no section, table or
finding may be lost or changed on the way. Inputs a distributed run does not take (kernel profiles, GPU health,
allocator snapshots, one file holding several ranks) are refused in one line, never dropped in silence."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("distributed")

from distributed import LocalCluster  # noqa: E402

from tests.conftest import sample_dirs  # noqa: E402
from tracedoc.api import analyze  # noqa: E402
from tracedoc.errors import InputError  # noqa: E402
from tracedoc.formats import BY_NAME  # noqa: E402
from tracedoc.ingest import InputFile, discover  # noqa: E402
from tracedoc.scale import ClusterSpec, analyze_distributed  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def one_worker():
    """One worker process of one thread, as ``--workers 1`` starts: one cluster for every sample."""
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        yield ClusterSpec(scheduler=c.scheduler_address)


def distributable(sample: Path) -> list[InputFile]:
    """The sample's inputs a distributed run takes (per-rank timelines and flight-recorder dumps)."""
    return [i for i in discover([sample]) if BY_NAME[i.format].distributable]


@pytest.mark.parametrize("sample", sample_dirs(), ids=lambda p: p.name)
def test_workers_report_equals_local(sample: Path, one_worker: ClusterSpec, tmp_path: Path) -> None:
    inputs = distributable(sample)
    if len(inputs) < len(discover([sample])):  # the sample as a whole is refused, before any work
        with pytest.raises(InputError, match="without --workers"):
            analyze_distributed(sample, one_worker, cache_dir=tmp_path / "refused")
    if not inputs:
        return
    paths = [i.path for i in inputs]
    local = analyze(paths, cache_dir=tmp_path / "local")
    try:
        distributed = analyze_distributed(paths, one_worker, cache_dir=tmp_path / "dist")
    except InputError as exc:  # one file holding several ranks
        assert "without --workers" in str(exc)
        return
    assert distributed.summary.pop("missing_ranks") == []
    assert distributed.to_dict() == local.to_dict()

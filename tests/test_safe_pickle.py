"""Both pickled inputs — allocator snapshots (samples/memory-leak) and NCCL flight-recorder dumps
(samples/hang-slow-rank) — are bounded by one set of rules (tracedoc/ingest/safe_pickle.py): limits read from the
environment the same way, a budget of values that refuses the file in one line naming the variable that raises it,
and no class or function a pickle asks for is ever looked up."""

from __future__ import annotations

import gzip
import pickle
from collections import OrderedDict
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import SAMPLES
from tracedoc.cli import cli

SNAPSHOT = SAMPLES / "memory-leak" / "snapshot.pickle.gz"
DUMP = SAMPLES / "hang-slow-rank" / "trace_rank_0"
# input, its values variable, a budget it fits in, one it does not
CASES = {"snapshot": (SNAPSHOT, "TRACEDOC_MAX_SNAPSHOT_VALUES", "3_000_000", "1_000", "the allocator snapshot"),
         "dump": (DUMP, "TRACEDOC_MAX_FR_VALUES", "10_000", "40", "the flight-recorder dump")}


def analyze_cli(path: Path):
    return CliRunner().invoke(cli, ["analyze", str(path), "--no-cache", "--format", "json"])


@pytest.mark.parametrize("case", CASES)
def test_one_budget_rule_for_both(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path, var, fits, too_small, what = CASES[case]
    monkeypatch.setenv(var, fits)  # '_' between digits, as in Python
    assert analyze_cli(path).exit_code == 0
    monkeypatch.setenv(var, too_small)
    result = analyze_cli(path)
    limit = int(too_small.replace("_", ""))
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert f"{what} would make the reader build over {limit:,} values" in result.stderr
    assert f"set {var} to read more" in result.stderr
    for bad in ("²", "0", "lots"):  # '²' passes str.isdigit; int() refuses it
        monkeypatch.setenv(var, bad)
        result = analyze_cli(path)
        assert result.exit_code == 2 and result.stderr.count("\n") == 1
        assert f"{var}=" in result.stderr and "is not a positive whole number" in result.stderr


class Planted:
    """What a hostile pickle would make the reader build, if it looked classes up."""

    def __reduce__(self):
        return (OrderedDict, ())


@pytest.mark.parametrize("case", CASES)
def test_neither_reader_looks_up_a_class(case: str, tmp_path: Path) -> None:
    """The real file with one value replaced by an object: refused in one line, naming what it asked for or the
    opcode, and nothing was built from it."""
    path = CASES[case][0]
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    data = pickle.loads(raw)  # our own sample, trusted
    data["planted"] = Planted()
    hostile = tmp_path / ("snapshot.pickle" if case == "snapshot" else "trace_rank_0")
    hostile.write_bytes(pickle.dumps(data, protocol=4))
    result = analyze_cli(hostile)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "refused" in result.stderr and ("collections" in result.stderr or "GLOBAL" in result.stderr)

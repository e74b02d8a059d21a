"""Arrow columns made from Python values without pyarrow's conversion (tracedoc.ingest.arrow_values): the same
arrays as ``pa.array`` makes of the same values, for every type the readers build."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from tracedoc.ingest import arrow_values

_FRAME = pa.struct([("name", pa.string()), ("filename", pa.string()), ("line", pa.int32())])
CASES: list[tuple[list[Any], pa.DataType]] = [
    ([1, None, 3, -2**63, 2**63 - 1], pa.int64()),
    ([1, 2, 3], pa.int32()),
    ([], pa.int64()),
    ([None, None], pa.int8()),
    ([1.5, None, float("nan"), 2], pa.float64()),
    ([True, None, False] * 5, pa.bool_()),
    ([True] * 9, pa.bool_()),
    (["a", None, "é€", ""], pa.string()),
    ([None], pa.string()),
    ([[1, 2], [], None, [3]], pa.list_(pa.int64())),
    ([[[1, 2], [3]], None, [[]], [None, [4]]], pa.list_(pa.list_(pa.int64()))),
    ([["a"], None, ["b", None]], pa.list_(pa.string())),
    ([[{"name": "f", "filename": "x.py", "line": 3}, {"name": None, "line": None}], None, []], pa.list_(_FRAME)),
]


@pytest.mark.parametrize(("values", "type"), CASES, ids=[f"{t}-{i}" for i, (_, t) in enumerate(CASES)])
def test_an_array_is_the_one_pyarrow_converts(values: list[Any], type: pa.DataType) -> None:
    built = arrow_values.array(values, type)
    built.validate(full=True)
    expected = pa.array(values, type)
    assert (built.type, built.null_count, built.to_string()) == (expected.type, expected.null_count,
                                                                 expected.to_string())


def test_a_table_of_rows_reads_a_missing_column_as_null() -> None:
    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    rows = [{"a": 1, "b": "x"}, {"a": None}]
    assert arrow_values.table(rows, schema).equals(pa.Table.from_pylist(rows, schema=schema))
    assert arrow_values.table((), schema).equals(schema.empty_table())


def test_a_scalar_and_a_value_past_its_type() -> None:
    assert arrow_values.scalar(2, pa.int8()).equals(pa.scalar(2, pa.int8()))
    assert arrow_values.scalar(None, pa.string()).equals(pa.scalar(None, pa.string()))
    with pytest.raises(OverflowError):
        arrow_values.array([2**63], pa.int64())


def test_a_type_not_built_here_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="timestamp"):
        arrow_values.array([1], pa.timestamp("ns"))


def test_a_lone_surrogate_becomes_the_replacement_character() -> None:
    """A name with a lone surrogate (what a reader decoding bytes leniently makes of a corrupt byte: the fuzzer's
    mutant ncu-rep/flip/1987997706 gave one through ncu_report, and exited 3) is stored with U+FFFD in its place,
    the other values unchanged, where encoding it failed."""
    values = ["gemm_kernel", "bad\udcd0name", None, "é€"]
    assert arrow_values.array(values, pa.string()).to_pylist() == ["gemm_kernel", "bad\ufffdname", None, "é€"]

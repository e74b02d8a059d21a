"""Arrow arrays, scalars and tables made from Python values without pyarrow's conversion of Python objects.

``pa.array``, ``pa.scalar``, ``pa.table`` of lists, ``pa.Table.from_pylist`` and a compute function handed a Python
value all first ask whether the value is a pandas object, and pyarrow imports pandas to ask: 0.3–0.45 s of CPU on
every run where pandas is installed (the dashboard's dependencies bring it). The readers that build Arrow columns
from Python values (Nsight Compute reports and CSV exports, allocator snapshots, flight-recorder dumps) build them
here instead, from their buffers (``pa.Array.from_buffers``): numbers and booleans through numpy, strings as their
UTF-8 bytes laid end to end with offsets, lists and structs from their children. None is null; values are checked
by the readers before they come here: an integer past its type's range raises OverflowError, as numpy does, but a
number column takes what numpy takes for a number (True as 1, '12' as 12) where pyarrow refused it.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, repeat
from typing import Any

import numpy as np
import pyarrow as pa

_INT32_MAX = 2**31 - 1
# A lone surrogate: what a reader decoding bytes leniently ('surrogateescape') makes of a corrupt one, which UTF-8
# cannot hold; a text column stores U+FFFD in its place.
LONE_SURROGATES = re.compile("[\ud800-\udfff]")
# The types built here: numbers, booleans, strings, and lists and structs of them.
_KINDS = (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean, pa.types.is_string, pa.types.is_list,
          pa.types.is_struct)


def array(values: Sequence[Any], type: pa.DataType) -> pa.Array:
    """``values`` as an Arrow array of ``type`` (integers, floats, booleans, strings, and lists and structs of
    them; a struct's values are dicts by field name, a missing field null)."""
    if not any(is_kind(type) for is_kind in _KINDS):
        raise TypeError(f"no Arrow column of {type} is made from Python values here")
    n = len(values)
    if pa.types.is_integer(type):
        try:  # no None among them: numpy converts them in one pass
            return pa.Array.from_buffers(type, n, [None, pa.py_buffer(np.fromiter(values, _number_dtype(type), n))],
                                         null_count=0)
        except TypeError:
            pass
    if pa.types.is_integer(type) or pa.types.is_floating(type) or pa.types.is_boolean(type):
        objects = np.fromiter(values, object, n)
        missing = np.equal(objects, np.array(None))
    else:
        missing = np.fromiter(map(operator.is_, values, repeat(None)), bool, n)
    nulls = int(missing.sum())
    buffers: list[pa.Buffer | None] = [pa.py_buffer(np.packbits(~missing, bitorder="little")) if nulls else None]
    children: list[pa.Array] = []
    if pa.types.is_string(type):
        texts = [("" if v is None else v) for v in values] if nulls else values
        joined = "".join(texts)
        try:
            data = joined.encode()  # ASCII (as most are): each text's bytes as many as its characters
        except UnicodeEncodeError:  # a lone surrogate (LONE_SURROGATES)
            texts = [LONE_SURROGATES.sub("\ufffd", t) for t in texts]
            joined = "".join(texts)
            data = joined.encode()
        lengths = map(len, texts) if len(data) == len(joined) else (len(t.encode()) for t in texts)
        buffers += [_offsets(lengths, n), pa.py_buffer(data)]
    elif pa.types.is_list(type):
        lists = [(() if v is None else v) for v in values] if nulls else values
        buffers.append(_offsets(map(len, lists), n))
        children.append(array(list(chain.from_iterable(lists)), type.value_type))
    elif pa.types.is_struct(type):
        dicts = [({} if v is None else v) for v in values] if nulls else values
        children += [array(list(map(dict.get, dicts, repeat(f.name))), f.type)
                     for f in (type.field(i) for i in range(type.num_fields))]
    else:
        if nulls:
            objects[missing] = False if pa.types.is_boolean(type) else 0
        buffers.append(pa.py_buffer(np.packbits(objects.astype(bool), bitorder="little") if pa.types.is_boolean(type)
                                    else objects.astype(_number_dtype(type))))
    return pa.Array.from_buffers(type, n, buffers, null_count=nulls, children=children or None)


def scalar(value: Any, type: pa.DataType) -> pa.Scalar:
    """One value as an Arrow scalar of ``type``, for a compute function's argument."""
    return array([value], type)[0]


def table(rows: Iterable[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """Rows (dicts by column name, a missing column null) as a table of ``schema``."""
    rows = list(rows)
    return columns_table({name: [row.get(name) for row in rows] for name in schema.names}, schema)


def columns_table(columns: Mapping[str, Sequence[Any]], schema: pa.Schema) -> pa.Table:
    """A list of values per column (every column of ``schema``, of one length) as a table of ``schema``."""
    return pa.Table.from_arrays([array(columns[f.name], f.type) for f in schema], schema=schema)


def _number_dtype(type: pa.DataType) -> np.dtype:
    """numpy's dtype of the same values as an Arrow integer or float type."""
    if pa.types.is_floating(type):
        return np.dtype(f"float{type.bit_width}")
    if not pa.types.is_integer(type):
        raise TypeError(f"no Arrow column of {type} is made from Python values here")
    return np.dtype(f"{'int' if pa.types.is_signed_integer(type) else 'uint'}{type.bit_width}")


def _offsets(lengths: Iterable[int], n: int) -> pa.Buffer:
    """The 32-bit offsets of ``n`` values of these lengths laid end to end."""
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.fromiter(lengths, np.int64, n), out=offsets[1:])
    if offsets[-1] > _INT32_MAX:
        raise OverflowError(f"{offsets[-1]:,} bytes or items in one Arrow column, over its 32-bit offsets")
    return pa.py_buffer(offsets.astype(np.int32))

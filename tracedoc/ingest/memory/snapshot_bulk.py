"""The fast path of snapshot_pickle's opcode machine: runs of records of one shape read with one regular expression
each, instead of opcode by opcode.

torch's pickler writes every entry of a device's history as the same opcodes: EMPTY_DICT MEMOIZE MARK, for each key
a BINGET of its memoized name and the value, then SETITEMS. A value is an integer (BININT1, BININT2, BININT, LONG1),
a BINGET (a string or a stack written before), a new short string (memoized), a new list of frames (EMPTY_LIST
MEMOIZE and its items: BINGETs of frames written before, or new frame dicts of such values), None or a bool. The
first record of a shape (its keys in order) is read with the grammar of any such record (``_FLAT``) and a pattern is
compiled for those keys, each value one of the kinds seen at that key so far: the records that follow are matched
as one run (one call) and their values captured (one more). A run whose values are all of one kind per key and make
no new list is decoded column by column; any other is decoded record by record, in the file's order. Anything else
does not match and is left to the opcode machine: a value of another form, a key written for the first time, a
FRAME opcode inside a record, a protocol that BINPUTs instead of MEMOIZEs, and a record that refers to a value not
yet memoized (where the opcode machine stops with its error).

What the opcode machine would do is kept: each record takes the next memo slot, marked as read (``CONSUMED``), and
each new string, list and frame dict the next ones, in the file's order; a BINGET of a record already read is
refused. A run is at most ``_WINDOW`` bytes; at most ``_MAX_SHAPES`` sets of keys (each of at most ``_MAX_KEYS``)
are learnt and ``_MAX_COMPILED`` patterns compiled; the caller engages it only where three more levels of marks
(a record, its list of frames, a frame) stay within its bound on depth.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from itertools import accumulate, chain, repeat
from operator import add, ge, is_, itemgetter
from typing import Any

CONSUMED = object()  # the memo's marker for a record handed to a callback
REFERS_BACK = "the pickle refers back to a record already read; not as torch writes snapshots"

_WINDOW = 1 << 20
_MAX_SHAPES = 64
_MAX_KEYS = 32
_MAX_COMPILED = 48
_MAX_CACHED = 1 << 16  # strings, lists of frames and memo lookups kept per file
_U32 = struct.Struct("<I").unpack_from
_FROM = int.from_bytes
_LAST_8 = [struct.Struct("<" + "x" * skip + "q") for skip in range(3)]
_SLOTS, _LAST_REF, _VALUE_OF, _MADE = itemgetter(1), itemgetter(2), itemgetter(3), itemgetter(4)


class Refused(Exception):
    """A pickle that is not as torch writes snapshots (one line, without the path)."""


class _Later(Exception):
    """A BINGET of a memo slot not yet written (at the start of a run: written in it, or not yet)."""


# The kinds of value, by their opcode, and the pattern of each (no capturing groups).
_INT, _REF, _STR, _LIST = "int", "ref", "str", "list"
_CONSTANTS = {"none": None, "true": True, "false": False}
_ORDER = (_INT, _REF, _STR, _LIST, "none", "true", "false")
_KIND_OF = {0x4B: _INT, 0x4D: _INT, 0x4A: _INT, 0x8A: _INT, 0x68: _REF, 0x6A: _REF, 0x8C: _STR, 0x5D: _LIST,
            0x4E: "none", 0x88: "true", 0x89: "false"}
_KEY = b"h.|j...."
_SIMPLE = {
    _INT: b"K.|M..|J....|\x8a(?:" + b"|".join(re.escape(bytes([n])) + b".{%d}" % n for n in range(9)) + b")",
    _REF: _KEY,
    _STR: b"\x8c(?:" + b"|".join(re.escape(bytes([n])) + b".{%d}" % n for n in range(256)) + b")\x94",
    "none": b"N", "true": b"\x88", "false": b"\x89",
}
_SIMPLE_VALUE = b"|".join(_SIMPLE.values())
_FRESH_DICT = b"\\}\x94\\((?:(?:" + _KEY + b")(?:" + _SIMPLE_VALUE + b")){1,%d}+u" % _MAX_KEYS
_ITEM = _KEY + b"|" + _FRESH_DICT
_SOURCE = {**_SIMPLE, _LIST: b"\\]\x94(?:(?:" + _ITEM + b")a|(?:\\((?:" + _ITEM + b")++e)*+)"}
_VALUE = b"|".join(_SOURCE.values())
_FLAT = re.compile(b"\\}\x94\\((?:(?:" + _KEY + b")(?:" + _VALUE + b")){1,%d}+u" % _MAX_KEYS, re.DOTALL)
_PAIR = re.compile(b"(" + _KEY + b")(" + _VALUE + b")", re.DOTALL)
_ITEMS = re.compile(b"(" + _KEY + b")|(" + _FRESH_DICT + b")", re.DOTALL)
_SIMPLE_PAIR = re.compile(b"(" + _KEY + b")(" + _SIMPLE_VALUE + b")", re.DOTALL)


class Records:
    """A run of records of one shape: ``count`` dicts with ``keys``, held as one column of values per key (a column
    of integers is decoded when first asked for)."""

    __slots__ = ("keys", "count", "slots", "handed", "_ints", "_columns")

    def __init__(self, keys: tuple[str, ...], ints: list[bool], columns: list[Sequence], slots: Sequence[int]) -> None:
        self.keys, self.count, self._ints, self._columns = keys, len(columns[0]), ints, columns
        self.slots = slots  # each record's memo slot
        self.handed = False  # appended to a sink, or made dicts again, at least once

    def column(self, key: str) -> Sequence | None:
        """The values of ``key``, one per record; None if the records have no such key."""
        if key not in self.keys:
            return None
        k = self.keys.index(key)
        if self._ints[k] and type(self._columns[k][0]) is bytes:
            self._columns[k] = _ints(self._columns[k])
        return self._columns[k]

    def holds_ints(self, key: str) -> bool:
        """True if every value of ``key`` is an integer opcode's (a plain int, within 64 bits)."""
        return key in self.keys and self._ints[self.keys.index(key)]

    def dicts(self) -> list[dict]:
        """The records as the opcode machine builds them."""
        columns = [self.column(key) for key in self.keys]
        return [dict(zip(self.keys, values)) for values in zip(*columns)]


class _Shape:
    """The patterns for records with one sequence of keys, each value one of the kinds given for its key: ``run``
    matches consecutive records, ``values`` captures a record's values (one group per key and kind)."""

    __slots__ = ("keys", "kinds", "fields", "groups", "fixed", "run", "values")

    def __init__(self, tokens: tuple[bytes, ...], keys: tuple[str, ...], kinds: tuple[tuple[str, ...], ...]) -> None:
        self.keys, self.kinds = keys, kinds
        self.fixed = 4 + sum(map(len, tokens))  # a record's bytes besides its values: }\x94( keys u
        captured: list[bytes] = []
        bare: list[bytes] = []
        self.fields: list[tuple[tuple[str, int], ...]] = []  # per key: (kind, its group's index) for each kind
        self.groups = 0
        for token, field_kinds in zip(tokens, kinds):
            key = re.escape(token)
            captured.append(key + b"(?:" + b"|".join(b"(" + _SOURCE[kind] + b")" for kind in field_kinds) + b")")
            bare.append(key + b"(?:" + b"|".join(_SOURCE[kind] for kind in field_kinds) + b")")
            self.fields.append(tuple((kind, self.groups + n) for n, kind in enumerate(field_kinds)))
            self.groups += len(field_kinds)
        self.run = re.compile(b"(?:\\}\x94\\(" + b"".join(bare) + b"u)*+", re.DOTALL)
        self.values = re.compile(b"\\}\x94\\(" + b"".join(captured) + b"u", re.DOTALL)

    def end_of_run(self, data: Any, i: int, end: int) -> int:
        """Where the run of records of this shape from byte ``i`` ends (``i``: no such record there)."""
        found = self.run.match(data, i, end)
        return found.end() if found is not None else i


class _Refs(dict):
    """BINGET tokens → the values memoized before ``base``, kept once looked up: a slot's value changes only where
    a BINPUT writes it again (``Bulk.forget``) or a record the opcode machine read is handed over (those, in
    ``pending``, are looked up each time)."""

    def __init__(self, memo: list, pending: dict[int, tuple[int, dict]]) -> None:
        super().__init__()
        self.memo, self.pending, self.base = memo, pending, 0

    def __missing__(self, token: bytes) -> Any:
        index = _index(token)
        if index >= self.base:
            raise _Later
        value = self.memo[index]
        if value is CONSUMED:
            raise Refused(REFERS_BACK)
        if id(value) not in self.pending:
            if len(self) >= _MAX_CACHED:
                self.clear()
            self[token] = value
        return value


class _Tokens(dict):
    """A value's token → (kind, the memo slots it writes, the highest memo index it reads (-1: none), its value,
    the slots' values): an integer, a memo index, a string, or for a new list of frames (refs only?, its items: a
    memo index or a new frame dict's (key's memo index, value's entry) pairs)."""

    def __missing__(self, token: bytes) -> tuple:
        kind = _KIND_OF[token[0]]
        if kind == _INT:
            entry: tuple = (kind, 0, -1, _int(token), ())
        elif kind == _REF:
            entry = (kind, 0, _index(token), _index(token), ())
        elif kind == _STR:
            text = str(token[2:-1], "utf-8", "surrogatepass")
            entry = (kind, 1, -1, text, (text,))
        elif kind == _LIST:
            items = tuple(_index(ref) if ref else tuple((_index(key), self[value]) for key, value in
                                                        _SIMPLE_PAIR.findall(fresh, 3, len(fresh) - 1))
                          for ref, fresh in _ITEMS.findall(token, 2))
            dicts = [item for item in items if type(item) is tuple]
            read = [item for item in items if type(item) is int]
            read += [index for item in dicts for key, value in item for index in (key, value[2])]
            entry = (kind, 1 + sum(1 + sum(value[1] for _, value in item) for item in dicts), max(read, default=-1),
                     (not dicts, items), None)
        else:
            entry = (kind, 0, -1, _CONSTANTS[kind], ())
        if kind != _REF:  # (a BINGET of a slot written lately is seldom seen twice)
            if len(self) >= _MAX_CACHED:
                self.clear()
            self[token] = entry
        return entry


class SharedFrames(list):
    """A new list of frames made only of BINGETs, read in bulk: one object for every record whose stack has the
    same bytes (the opcode machine makes one each time; nothing tells them apart but appending to one, which the
    opcode machine refuses for this type)."""

    __slots__ = ()


class Bulk:
    """The shapes learnt so far from one file's records, and the reading of runs of records with them."""

    def __init__(self, memo: list, pending: dict[int, tuple[int, dict]]) -> None:
        self.memo, self.pending = memo, pending
        self.shapes: dict[tuple[bytes, ...], _Shape | None] = {}
        self.current: _Shape | None = None
        self.compiled = 0
        self.refs = _Refs(memo, pending)
        self.tokens = _Tokens()
        self.shared: dict[bytes, SharedFrames] = {}

    def forget(self) -> None:
        """A memo slot was written again (BINPUT): the keys the patterns name, and the values, may have changed."""
        self.shapes.clear()
        self.current = None
        self.refs.clear()
        self.shared.clear()

    def records(self, data: Any, i: int) -> tuple[Records, int] | None:
        """The run of records starting at byte ``i`` (an EMPTY_DICT), with the memo extended as the opcode machine
        would: (the records, the byte after them); None where the first record is not of a known or learnable
        shape."""
        end = min(len(data), i + _WINDOW)
        shape = self.current
        stop = shape.end_of_run(data, i, end) if shape is not None else i
        if shape is None or stop == i:
            shape = self._learn(data, i, end)
            if shape is None:
                return None
            stop = shape.end_of_run(data, i, end)
            if stop == i:
                return None
            self.current = shape
        found = shape.values.findall(data, i, stop)
        rows = found if shape.groups > 1 else [(token,) for token in found]
        columns = list(zip(*rows))
        present = [fields if len(fields) == 1 else tuple((kind, g) for kind, g in fields if any(columns[g]))
                   for fields in shape.fields]
        run = self._columns(shape, columns, present, stop)
        return run if run is not None else self._one_by_one(shape, rows, columns, present, i)

    def _columns(self, shape: _Shape, columns: list[tuple], present: list[tuple], stop: int
                 ) -> tuple[Records, int] | None:
        """A run decoded column by column: the slots each record writes counted from its values, the memo
        extended with them all, then the BINGETs looked up. None (nothing changed) where a value refers to a slot
        written by the same record or a later one."""
        memo, refs, entry, shared = self.memo, self.refs, self.tokens.__getitem__, self.shared
        base, count = len(memo), len(columns[0])
        refs.base = base
        kinds = [frozenset(kind for kind, _ in fields) for fields in present]
        tokens: list[Sequence] = []
        for fields in present:
            merged = columns[fields[0][1]]
            for _, g in fields[1:]:  # a key of several kinds: each record's one captured token
                merged = list(map(add, merged, columns[g]))
            tokens.append(merged)
        values: list[Sequence | None] = [None] * len(kinds)
        infos: list[list] = [[]] * len(kinds)
        for k, kind in enumerate(kinds):
            if kind == {_REF}:  # BINGETs of values written before the run, from the cache
                try:
                    values[k] = list(map(refs.__getitem__, tokens[k]))
                    continue
                except _Later:
                    pass
            if kind == {_INT}:  # decoded when asked for
                continue
            if _REF in kind and len(kind) > 1:  # a BINGET's entry made here: a slot written lately is seldom read twice
                infos[k] = [entry(t) if t[0] != 0x68 and t[0] != 0x6A else
                            (_REF, 0, (at := t[1] if t[0] == 0x68 else _U32(t, 1)[0]), at, ()) for t in tokens[k]]
            else:
                infos[k] = list(map(entry, tokens[k]))
        making = [k for k, kind in enumerate(kinds) if _STR in kind or _LIST in kind]
        if making:
            counts = [map(_SLOTS, infos[k]) for k in making]
            bases: Sequence[int] = list(accumulate(map(sum, zip(repeat(1), *counts)), initial=base))
        else:
            bases = range(base, base + count + 1)
        for k, kind in enumerate(kinds):
            if values[k] is None and (_REF in kind or _LIST in kind) and any(map(ge, map(_LAST_REF, infos[k]),
                                                                                bases)):
                return None
        lists: list[tuple] = []
        made: dict[int, list] = {}
        for k in making:
            made[k] = [info[4] if info[0] != _LIST else (frames,) if (frames := shared.get(token)) is not None
                       else self._made(token, info, lists) for token, info in zip(tokens[k], infos[k])] \
                if _LIST in kinds[k] else list(map(_MADE, infos[k]))
        if made:
            memo.extend(chain.from_iterable(chain.from_iterable(zip(repeat((CONSUMED,)), *made.values()))))
        else:
            memo.extend(repeat(CONSUMED, count))
        for k, kind in enumerate(kinds):
            if values[k] is not None:
                continue
            if kind == {_INT}:
                values[k] = tokens[k]
            elif kind == {_REF}:
                values[k] = list(map(memo.__getitem__, map(_VALUE_OF, infos[k])))
            elif kind == {_LIST}:
                values[k] = list(map(itemgetter(0), made[k]))
            elif _REF in kind or _LIST in kind:
                values[k] = [memo[info[3]] if info[0] == _REF else slots[0] if info[0] == _LIST else info[3]
                             for info, slots in zip(infos[k], made.get(k) or repeat(()))]
            else:
                values[k] = list(map(_VALUE_OF, infos[k]))
            if _REF in kind and any(map(is_, values[k], repeat(CONSUMED))):  # type: ignore[arg-type]
                raise Refused(REFERS_BACK)
        for frames, items, fresh, token in lists:
            self._fill(frames, items, fresh, token)
        return Records(shape.keys, [kind == {_INT} for kind in kinds], values, bases[:-1]), stop  # type: ignore[arg-type]

    def _made(self, token: bytes, info: tuple, lists: list[tuple]) -> tuple:
        """The slots a new list of frames writes: the list, then each new frame dict and its new strings (empty
        containers here, filled by _fill once the memo holds the run). A list of BINGETs only is shared."""
        refs_only, items = info[3]
        if refs_only:
            frames = self.shared.get(token)
            if frames is None:
                if len(self.shared) >= _MAX_CACHED:
                    self.shared.clear()
                frames = self.shared[token] = SharedFrames()
                lists.append((frames, items, (), token))
            return (frames,)
        slots: list = [[]]
        fresh = []
        for item in items:
            if type(item) is tuple:
                frame: dict = {}
                slots.append(frame)
                fresh.append(frame)
                slots.extend(value[3] for _, value in item if value[0] == _STR)
        lists.append((slots[0], items, fresh, token))
        return tuple(slots)

    def _fill(self, frames: list, items: tuple, fresh: Sequence[dict], token: bytes) -> None:
        """A new list of frames given its items, as the opcode machine builds it."""
        memo = self.memo
        if not fresh:
            frames.extend(map(memo.__getitem__, items))
            if any(map(is_, frames, repeat(CONSUMED))):
                raise Refused(REFERS_BACK)
            if any(id(frame) in self.pending for frame in frames):  # a record still to be handed over
                self.shared.pop(token, None)
            return
        new = iter(fresh)
        for item in items:
            if type(item) is int:
                frames.append(self._at(item))
                continue
            frame = next(new)
            for key, value in item:
                frame[self._at(key)] = self._at(value[3]) if value[0] == _REF else value[3]
            frames.append(frame)

    def _one_by_one(self, shape: _Shape, rows: list[tuple], columns: list[tuple], present: list[tuple],
                    start: int) -> tuple[Records, int] | None:
        """A run decoded record by record where a key's values differ in kind or make lists (the keys whose values
        are all integers or all one constant stay columns). A record that refers to a slot not yet written ends
        the run before it: the opcode machine reads it next."""
        memo = self.memo
        plain = {k: fields[0] for k, fields in enumerate(present)
                 if len(fields) == 1 and (fields[0][0] == _INT or fields[0][0] in _CONSTANTS)}
        walked: list[tuple[tuple[int, ...], list]] = [(tuple(g for _, g in fields), [])
                                                       for k, fields in enumerate(present) if k not in plain]
        value, append = self._value, memo.append
        done = 0
        slots = []
        for row in rows:
            mark = len(memo)
            slots.append(mark)
            append(CONSUMED)
            try:
                for groups, out in walked:
                    for g in groups:  # the key's one captured kind
                        token = row[g]
                        if token:
                            break
                    if token[0] == 0x6A or token[0] == 0x68:  # BINGET: the commonest, here
                        index = token[1] if token[0] == 0x68 else _U32(token, 1)[0]
                        if index >= len(memo):
                            raise _Later
                        found = memo[index]
                        if found is CONSUMED:
                            raise Refused(REFERS_BACK)
                        out.append(found)
                    else:
                        out.append(value(token))
            except _Later:
                del memo[mark:]
                for _, out in walked:
                    del out[done:]
                break
            done += 1
        if not done:
            return None
        outs = iter(out for _, out in walked)
        result: list[Sequence] = []
        for k in range(len(shape.keys)):
            if k not in plain:
                result.append(next(outs))
            elif plain[k][0] == _INT:
                result.append(columns[plain[k][1]][:done])
            else:
                result.append([_CONSTANTS[plain[k][0]]] * done)
        stop = start + done * shape.fixed + sum(map(len, chain.from_iterable(rows[:done])))
        ints = [k in plain and plain[k][0] == _INT for k in range(len(shape.keys))]
        return Records(shape.keys, ints, result, slots[:done]), stop

    def _value(self, token: bytes) -> Any:
        """One value, read as the opcode machine would at this point of the file."""
        entry = self.tokens[token]
        return self._list(entry) if entry[0] == _LIST else self._simple(entry)

    def _simple(self, entry: tuple) -> Any:
        if entry[0] == _REF:
            return self._at(entry[3])
        if entry[0] == _STR:
            self.memo.append(entry[3])
        return entry[3]

    def _at(self, index: int) -> Any:
        if index >= len(self.memo):
            raise _Later
        value = self.memo[index]
        if value is CONSUMED:
            raise Refused(REFERS_BACK)
        return value

    def _list(self, entry: tuple) -> list:
        """A new list of frames: memoized, then its new frame dicts and their strings, in order."""
        memo = self.memo
        frames: list = []
        memo.append(frames)
        for item in entry[3][1]:
            if type(item) is int:
                frames.append(self._at(item))
                continue
            frame: dict = {}
            memo.append(frame)
            for key, value in item:
                name = self._at(key)
                frame[name] = self._simple(value)
            frames.append(frame)
        return frames

    def _learn(self, data: Any, i: int, end: int) -> _Shape | None:
        """The shape of the record at ``i`` read with the grammar of any flat record; a known set of keys takes on
        the kinds of value of this record too."""
        flat = _FLAT.match(data, i, end)
        if flat is None:
            return None
        pairs = _PAIR.findall(flat.group(), 3)
        tokens = tuple(key for key, _ in pairs)
        kinds = [_KIND_OF[value[0]] for _, value in pairs]
        shape = self.shapes.get(tokens, self)
        if shape is None:
            return None
        if isinstance(shape, _Shape):
            if all(kind in have for kind, have in zip(kinds, shape.kinds)):
                return shape
            keys = shape.keys
            widened = tuple(tuple(k for k in _ORDER if k in have or k == kind)
                            for kind, have in zip(kinds, shape.kinds))
        else:
            if len(self.shapes) >= _MAX_SHAPES:
                return None
            names = [self.memo[_index(token)] if _index(token) < len(self.memo) else None for token in tokens]
            keys = tuple(name for name in names if type(name) is str)
            if len(set(keys)) < len(names):  # a key not a string, or twice: left to the opcode machine
                self.shapes[tokens] = None
                return None
            widened = tuple((kind,) for kind in kinds)
        if self.compiled >= _MAX_COMPILED:
            return None
        self.compiled += 1
        shape = self.shapes[tokens] = _Shape(tokens, keys, widened)
        return shape


def _index(token: bytes) -> int:
    """The memo index of a BINGET or LONG_BINGET."""
    return token[1] if token[0] == 0x68 else _U32(token, 1)[0]


def _ints(tokens: Sequence[bytes]) -> list[int]:
    """The values of BININT1, BININT2, BININT and LONG1 opcodes (LONG1 of at most 8 bytes: within 64 bits)."""
    if len(set(tokens[:32])) <= 8:  # few distinct values (sizes, streams): each decoded once
        table = {token: _int(token) for token in set(tokens)}
        return list(map(table.__getitem__, tokens))
    count, size = len(tokens), len(tokens[0])
    if 8 <= size <= 10 and len(set(map(len, tokens))) == 1:  # LONG1s of 6 to 8 bytes (addresses, times)
        joined = b"".join(tokens)
        if joined[::size] == b"\x8a" * count and joined[1::size] == bytes([size - 2]) * count:
            shift = 8 * (10 - size)  # each token's last 8 bytes are its value shifted left by this many bits
            return [value >> shift for (value,) in _LAST_8[size - 8].iter_unpack(joined)]
    return [_FROM(t, "little", signed=True) >> 16 if t[0] == 0x8A else _int(t) for t in tokens]


def _int(token: bytes) -> int:
    """One integer opcode's value (a LONG1's token read whole as a little-endian integer is its value shifted
    left by 16 bits)."""
    op = token[0]
    if op == 0x4B:
        return token[1]
    if op == 0x8A:
        return _FROM(token, "little", signed=True) >> 16
    return _FROM(token[1:], "little", signed=op == 0x4A)

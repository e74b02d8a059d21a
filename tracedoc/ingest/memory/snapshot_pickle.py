"""A bounded, streaming reader of allocator-snapshot pickles: a small opcode machine that builds only plain data and
hands each record of the snapshot's two big lists to a callback as soon as it is complete, instead of building the
whole snapshot first.

``pickle.load`` of a 1 GB snapshot builds some 13 million dicts at once (over 20 GB of memory). Here the file is
mapped, not read; the opcodes are run one by one (protocols 2 to 5: containers, strings, bytes, numbers, the memo,
frames); every opcode that would look up or call a class or function (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST,
OBJ, NEWOBJ, PERSID, EXT…) is refused before anything runs, as is anything else not listed. A list that is the value
of the top-level ``segments`` key, or an item of the top-level ``device_traces`` list, is a *sink* (as are the
top-level ``external_annotations``, of kind ANNOTATIONS, and the list of any other top-level key, of kind UNREAD:
none of its items is kept, but the callback counts them): what is
appended to it goes to the callback and is dropped, and the memo keeps only a marker for it (a pickle that refers
back to such a record is refused: torch's never does). So memory holds the memo's shared values (frames, strings), one
batch of records (pickle appends 1000 at a time) and the rest of the snapshot's small dict.

The records of a sink's batch are read in bulk where they match (snapshot_bulk: a run of records of one shape, one
regular expression, handed over as ``Records``, columns of values); the opcode machine reads whatever does not
match and gets the same values, memo and errors. A Records is one value of the stack: an opcode that would take a
run's records apart (none in torch's pickles) first makes it the dicts the opcode machine would have built
(``loosen``). Two things are refused that the opcode machine alone lets through: a BINGET of a record of the batch
not yet handed over (it refuses one of a record handed over), and an append to a list of frames read in bulk,
which is shared among the records whose stacks are the same BINGETs. The cyclic garbage collector is paused while
the file is read: the reader makes no cycles worth collecting, and a full collection would walk every memo slot.

A compressed snapshot is read from the stream of its unpacked bytes (``read_stream``), never unpacked to a file:
the machine holds the bytes from the opcode it runs on to a few MiB past it (``_Window``), and takes more at each
FRAME opcode, whose length it states: pickles of protocol 4 and 5 (torch's) are cut into frames of about 64 KiB,
and no opcode of a frame runs past its end; a string or bytes too large for a frame comes between two, its length
before it. An opcode that runs past the bytes held, the stream not ended, is one outside the frames: refused, as
is a frame longer than ``_MAX_FRAME``. A pickle without frames (protocol 2 or 3) needs the file (the caller's).

Bounds: the file's size (the caller's), the pages already read are dropped from memory as the reader goes on, at
most ``max_depth`` marks open and ``_MAX_STACK`` values on the stack (checked at each mark and frame and at each run
read in bulk, a run's records counted one by one; an unframed pickle pushes at most one value per byte between
marks), a BINPUT no further than ``_MAX_MEMO_GAP`` past the memo's end, and the callback's own budget of values.
"""

from __future__ import annotations

import gc
import mmap
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tracedoc.errors import InputError
from tracedoc.ingest.memory.snapshot_bulk import CONSUMED, REFERS_BACK, Bulk, Records, Refused, SharedFrames

_MAX_STACK = 1_000_000
UNREAD = "unread"  # the kind of the sink of a top-level list other than segments and device_traces
ANNOTATIONS = "external_annotations"  # the kind (and top-level key) of the record_function ranges' list
_BULK_KINDS = ("segments", "trace")  # the sinks whose records may come in bulk (snapshot_bulk's shapes)
_MAX_MEMO_GAP = 1 << 16
_DROP_EVERY = 64 << 20  # drop pages read so far from memory every this many bytes
_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)
_READ_AHEAD = 4 << 20  # a streamed pickle's bytes held past the opcode being run, at least
_MAX_FRAME = 16 << 20  # the longest frame a streamed pickle may state (torch's are about 64 KiB)
FRAME = b"\x95"  # the FRAME opcode, which follows PROTO in a pickle cut into frames

_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_F64 = struct.Struct(">d").unpack_from

_CODE_OPS = {ord("c"): "GLOBAL", 0x93: "STACK_GLOBAL", ord("R"): "REDUCE", ord("b"): "BUILD", ord("i"): "INST",
             ord("o"): "OBJ", 0x81: "NEWOBJ", 0x92: "NEWOBJ_EX", ord("P"): "PERSID", ord("Q"): "BINPERSID",
             0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4", 0x97: "NEXT_BUFFER", 0x98: "READONLY_BUFFER"}


class Sink:
    """A list whose items go to ``take(sink, items)`` as they are appended; ``count``: the records it has had."""

    __slots__ = ("kind", "device", "count")

    def __init__(self, kind: str, device: int) -> None:
        self.kind, self.device, self.count = kind, device, 0


class _Window:
    """A stream's bytes as the opcode machine reads them: those from the opcode it runs on, and more of the stream
    when it asks (``refill``); ``base`` is the offset in the stream of the first held byte."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self.base = 0
        self.ended = False

    def refill(self, data: bytes | mmap.mmap, i: int, need: int) -> tuple[bytes, int, int]:
        """``data[i:]`` and the stream's next bytes, at least ``need`` in all unless the stream ends first (and
        _READ_AHEAD where it has them): the new bytes, the index of the first (0) and their length."""
        parts = [data[i:]]
        held = len(parts[0])
        while held < max(need, _READ_AHEAD) and not self.ended:
            chunk = next(self._chunks, None)
            if chunk is None:
                self.ended = True
            else:
                parts.append(chunk)
                held += len(chunk)
        self.base += i
        data = b"".join(parts)
        return data, 0, len(data)


def read(path: Path, take: Callable[[Sink, list], None], what: str, max_depth: int = 32,
         name: Path | None = None) -> dict:
    """Run the pickle at ``path``; ``take(sink, items)`` receives each batch of records of the ``segments`` list and
    of each ``device_traces`` list (dicts, and ``Records``: runs of records of one shape read in bulk; ``sink.count``
    is the number of records before them). Returns the top-level dict with those lists as ``Sink`` objects. Raises
    InputError (one line, naming the input as ``name``, else ``path``) for anything but a plain-data pickle of a
    dict."""
    name = name or path
    with path.open("rb") as f:
        try:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file
            raise InputError(f"{name}: empty file: not {what}") from None
    try:
        return _checked(lambda: _run(data, take, max_depth), name, what, None)
    finally:
        data.close()


def read_stream(chunks: Iterator[bytes], name: Path, take: Callable[[Sink, list], None], what: str,
                max_depth: int = 32) -> dict:
    """``read`` of a pickle cut into frames (protocol 4 or 5) from the stream of its bytes, ``chunks``, held a
    few MiB at a time (``_Window``); a pickle without frames is refused (the caller unpacks it to a file)."""
    window = _Window(chunks)
    data, _, _ = window.refill(b"", 0, 11)  # PROTO and the first FRAME, at least
    if not data:
        raise InputError(f"{name}: empty file: not {what}")
    if data[2:3] != FRAME:
        raise InputError(f"{name}: {what} without frames (pickle protocol 2 or 3) cannot be read as it unpacks")
    return _checked(lambda: _run(data, take, max_depth, window), name, what, window)


def _checked(run: Callable[[], Any], name: Path, what: str, window: _Window | None) -> dict:
    """What ``run`` builds (the opcode machine over a file or a stream), the garbage collector paused meanwhile;
    every failure one line naming the input as ``name``."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        result = run()
    except InputError:
        raise
    except Refused as exc:
        raise InputError(f"{name}: {exc}") from None
    except (IndexError, struct.error):
        if window is not None and not window.ended:  # the bytes held end, the stream does not
            raise InputError(f"{name}: an opcode of the pickle runs past the frame that holds it: not as torch "
                             "writes snapshots") from None
        raise InputError(f"{name}: truncated or corrupt {what} (the pickle ends before its STOP)") from None
    except (Exception, MemoryError, RecursionError) as exc:  # a bad stack, an unhashable key, bad UTF-8, ...
        detail = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        detail = detail.replace("'SharedFrames'", "'list'")  # a list, as the pickle made it
        raise InputError(f"{name}: truncated or corrupt {what} ({detail})") from None
    finally:
        if collecting:
            gc.enable()
    if not isinstance(result, dict):
        raise InputError(f"{name}: not {what} (the pickle holds a {type(result).__name__}, not a dict)")
    return result


def _run(data: mmap.mmap | bytes, take: Callable[[Sink, list], None], max_depth: int,  # noqa: C901 - one loop
         window: _Window | None = None) -> Any:
    """The opcode machine over ``data``: the whole file mapped, or, with ``window``, the bytes of a stream held
    from the opcode it runs on (taking more at each FRAME, and before a string or bytes longer than those held)."""
    n = len(data)
    mapped = data if isinstance(data, mmap.mmap) else None  # a file's pages, dropped once read
    i = 0
    stack: list = []
    push = stack.append
    marks: list[int] = []
    memo: list = []
    remember = memo.append
    # a fresh dict directly in a sink's batch: its id → (its memo index, the dict, kept alive: the id is not reused)
    pending: dict[int, tuple[int, dict]] = {}
    traces: list | None = None  # the top-level device_traces list, once seen
    bulk = Bulk(memo, pending)
    held = 0  # records in the Records on the stack (a Records is one value of the stack)
    drop_at = _DROP_EVERY

    def top_level_value() -> bool:  # the next value pushed is that of a key of the top-level dict
        return bool(stack) and type(stack[0]) is dict and (
            (marks == [1] and len(stack) % 2 == 0) or (not marks and len(stack) == 2))

    def in_sink() -> Sink | None:  # the sink whose batch (or single APPEND) the top of the stack is an item of
        if marks and marks[-1] > 0 and marks[-1] <= len(stack) - 1:
            owner = stack[marks[-1] - 1]
            return owner if type(owner) is Sink else None
        return None

    def append_to(target: Any, items: list) -> None:
        nonlocal held
        if type(target) is list:
            target.extend(items)
        elif type(target) is Sink:
            count = len(items)
            for item in items:
                if type(item) is Records:
                    count += item.count - 1
                    if not item.handed:
                        item.handed = True
                        held -= item.count
            take(target, items)
            target.count += count
            for item in items:
                held_as = pending.pop(id(item), None)
                if held_as is not None:
                    memo[held_as[0]] = CONSUMED
        elif type(target) is SharedFrames:
            raise Refused("the pickle appends to a stack already read; not as torch writes snapshots")
        else:
            raise Refused(f"the pickle appends to a {type(target).__name__}, not a list")

    def loosen(start: int) -> None:
        """The Records among stack[start:] become the dicts the opcode machine would have there, in the memo and
        pending as its own records are until handed over: for an opcode that takes the values it pops apart
        (torch's pickles have none between a run and its APPENDS)."""
        nonlocal held
        for k in range(len(stack) - 1, max(start, 0) - 1, -1):
            run = stack[k]
            if type(run) is Records:
                records = run.dicts()
                stack[k:k + 1] = records
                marks[:] = [m + len(records) - 1 if m > k else m for m in marks]
                if not run.handed:
                    run.handed = True
                    held -= run.count
                    for record, slot in zip(records, run.slots):
                        memo[slot] = record
                        pending[id(record)] = (slot, record)

    while True:
        op = data[i]
        i += 1
        if op == 0x6A:  # LONG_BINGET
            v = memo[_U32(data, i)[0]]
            i += 4
            if v is CONSUMED:
                raise Refused(REFERS_BACK)
            push(v)
        elif op == 0x68:  # BINGET
            v = memo[data[i]]
            i += 1
            if v is CONSUMED:
                raise Refused(REFERS_BACK)
            push(v)
        elif op == 0x94:  # MEMOIZE
            if held and type(stack[-1]) is Records:
                loosen(len(stack) - 1)
            v = stack[-1]
            if type(v) is dict and not v and in_sink() is not None:
                pending[id(v)] = (len(memo), v)
            remember(v)
        elif op == 0x8C:  # SHORT_BINUNICODE
            size = data[i]
            push(str(data[i + 1:i + 1 + size], "utf-8", "surrogatepass"))
            i += 1 + size
        elif op == 0x4B:  # BININT1
            push(data[i])
            i += 1
        elif op == 0x8A:  # LONG1
            size = data[i]
            push(int.from_bytes(data[i + 1:i + 1 + size], "little", signed=True))
            i += 1 + size
        elif op == 0x28:  # MARK
            marks.append(len(stack))
            if len(stack) + held > _MAX_STACK:
                raise Refused(f"over {_MAX_STACK:,} values pending on the pickle's stack: not an allocator snapshot")
            if len(marks) > max_depth:
                raise Refused(f"nested more than {max_depth} levels deep: not an allocator snapshot")
        elif op == 0x7D:  # EMPTY_DICT: a record of a sink's batch starts the fast path (snapshot_bulk)
            owner = stack[marks[-1] - 1] if marks and marks[-1] else None
            run = bulk.records(data, i - 1) if type(owner) is Sink and owner.kind in _BULK_KINDS \
                and len(marks) + 3 <= max_depth else None
            if run is None:
                push({})
            else:
                push(run[0])
                i = run[1]
                held += run[0].count
                if len(stack) + held > _MAX_STACK:
                    raise Refused(f"over {_MAX_STACK:,} values pending on the pickle's stack: not an allocator "
                                  "snapshot")
        elif op == 0x75:  # SETITEMS
            if held and marks:
                loosen(marks[-1] - 1)
            m = marks.pop()
            d = stack[m - 1]
            if type(d) is not dict:
                raise Refused(f"the pickle sets items of a {type(d).__name__}, not a dict")
            for k in range(m, len(stack), 2):
                d[stack[k]] = stack[k + 1]
            del stack[m:]
        elif op == 0x4A:  # BININT
            push(_I32(data, i)[0])
            i += 4
        elif op == 0x4D:  # BININT2
            push(_U16(data, i)[0])
            i += 2
        elif op == 0x5D:  # EMPTY_LIST
            lst: Any = []
            if traces is not None and stack:  # a device's history: the next item of the device_traces list
                last = stack[-1]
                if last is traces and (not marks or marks[-1] <= len(stack)):
                    lst = Sink("trace", len(traces))
                elif type(last) is Sink and last.kind == "trace" and marks and marks[-1] < len(stack) \
                        and stack[marks[-1] - 1] is traces:
                    lst = Sink("trace", last.device + 1)
            if type(lst) is list and top_level_value():
                if stack[-1] == "segments":
                    lst = Sink("segments", 0)
                elif stack[-1] == "device_traces":
                    traces = lst
                elif stack[-1] == ANNOTATIONS:  # read by the callback a batch at a time, as the history is
                    lst = Sink(ANNOTATIONS, 0)
                else:  # a list of another key: counted by the callback, never held
                    lst = Sink(UNREAD, 0)
            push(lst)
        elif op == 0x65:  # APPENDS
            if held and marks and (marks[-1] < 1 or type(stack[marks[-1] - 1]) is not Sink):
                loosen(marks[-1] - 1)
            m = marks.pop()
            items = stack[m:]
            del stack[m:]
            append_to(stack[m - 1], items)
        elif op == 0x61:  # APPEND
            if held and (len(stack) < 2 or type(stack[-2]) is not Sink):
                loosen(len(stack) - 2)
            v = stack.pop()
            append_to(stack[-1], [v])
        elif op == 0x73:  # SETITEM
            if held:
                loosen(len(stack) - 3)
            v = stack.pop()
            k = stack.pop()
            d = stack[-1]
            if type(d) is not dict:
                raise Refused(f"the pickle sets an item of a {type(d).__name__}, not a dict")
            d[k] = v
        elif op == 0x4E:  # NONE
            push(None)
        elif op == 0x88:  # NEWTRUE
            push(True)
        elif op == 0x89:  # NEWFALSE
            push(False)
        elif op == 0x95:  # FRAME: the frames' bytes are read in order; only the pages behind are dropped
            if window is not None:  # streamed: hold the frame whole, and the header of the opcode after it
                size = _U64(data, i)[0]
                if size > _MAX_FRAME:
                    raise Refused(f"a frame of {size:,} bytes, over the {_MAX_FRAME:,} a snapshot read as it "
                                  "unpacks may have (torch writes frames of 64 KiB)")
                if i + 17 + size > n and not window.ended:
                    data, i, n = window.refill(data, i, 17 + size)
                i += 8
            else:
                i += 8
                if i >= drop_at and mapped is not None:
                    if _DONTNEED is not None:
                        mapped.madvise(_DONTNEED, 0, i - i % mmap.PAGESIZE)
                    drop_at = i + _DROP_EVERY
            if len(stack) + held > _MAX_STACK:
                raise Refused(f"over {_MAX_STACK:,} values pending on the pickle's stack: not an allocator snapshot")
        elif op == 0x58 or op == 0x8D:  # BINUNICODE, BINUNICODE8
            if op == 0x58:
                size = _U32(data, i)[0]
                i += 4
            else:
                size = _U64(data, i)[0]
                i += 8
            if i + size > n and window is not None and not window.ended:  # a string between two frames
                data, i, n = window.refill(data, i, size + 9)
            if i + size > n:
                raise IndexError
            push(str(data[i:i + size], "utf-8", "surrogatepass"))
            i += size
        elif op == 0x43 or op == 0x42 or op == 0x8E:  # SHORT_BINBYTES, BINBYTES, BINBYTES8
            if op == 0x43:
                size = data[i]
                i += 1
            elif op == 0x42:
                size = _U32(data, i)[0]
                i += 4
            else:
                size = _U64(data, i)[0]
                i += 8
            if i + size > n and window is not None and not window.ended:  # a string between two frames
                data, i, n = window.refill(data, i, size + 9)
            if i + size > n:
                raise IndexError
            push(data[i:i + size])
            i += size
        elif op == 0x47:  # BINFLOAT
            push(_F64(data, i)[0])
            i += 8
        elif op == 0x8B:  # LONG4
            size = _I32(data, i)[0]
            if size < 0 or size > 1 << 16:
                raise Refused(f"an integer of {size} bytes: not an allocator snapshot")
            push(int.from_bytes(data[i + 4:i + 4 + size], "little", signed=True))
            i += 4 + size
        elif op == 0x71 or op == 0x72:  # BINPUT, LONG_BINPUT
            if op == 0x71:
                idx = data[i]
                i += 1
            else:
                idx = _U32(data, i)[0]
                i += 4
            if idx > len(memo) + _MAX_MEMO_GAP:
                raise Refused(f"a memo index of {idx:,}, far past the {len(memo):,} values memoized")
            if idx >= len(memo):
                memo.extend([None] * (idx + 1 - len(memo)))
            else:
                bulk.forget()
            if held and type(stack[-1]) is Records:
                loosen(len(stack) - 1)
            v = stack[-1]
            if type(v) is dict and not v and in_sink() is not None:
                pending[id(v)] = (idx, v)
            memo[idx] = v
        elif op == 0x29:  # EMPTY_TUPLE
            push(())
        elif op == 0x85 or op == 0x86 or op == 0x87:  # TUPLE1, TUPLE2, TUPLE3
            if held:
                loosen(len(stack) - (op - 0x84))
            if op == 0x85:
                stack[-1] = (stack[-1],)
            else:
                stack[0x84 - op:] = [tuple(stack[0x84 - op:])]
        elif op == 0x74:  # TUPLE
            if held and marks:
                loosen(marks[-1])
            m = marks.pop()
            v = tuple(stack[m:])
            del stack[m:]
            push(v)
        elif op == 0x8F:  # EMPTY_SET: no snapshot has one; read as a list
            push([])
        elif op == 0x90:  # ADDITEMS
            if held and marks:
                loosen(marks[-1] - 1)
            m = marks.pop()
            items = stack[m:]
            del stack[m:]
            target = stack[-1]
            if type(target) is not list:
                raise Refused("the pickle adds to something that is not a set")
            target.extend(items)
        elif op == 0x30:  # POP
            if marks and marks[-1] == len(stack):
                marks.pop()
            else:
                if held:
                    loosen(len(stack) - 1)
                stack.pop()
        elif op == 0x31:  # POP_MARK
            if held and marks:
                loosen(marks[-1])
            del stack[marks.pop():]
        elif op == 0x32:  # DUP
            if held:
                loosen(len(stack) - 1)
            push(stack[-1])
        elif op == 0x80:  # PROTO
            if data[i] > 5:
                raise Refused(f"pickle protocol {data[i]}: not one this reader knows")
            i += 1
        elif op == 0x2E:  # STOP
            if held:
                loosen(0)
            if len(stack) != 1 or marks:
                raise Refused("the pickle stops with more than one value, or a mark, left")
            return stack[0]
        elif op in _CODE_OPS:
            detail = ""
            if op == 0x63:  # GLOBAL: "module\nname\n"
                end = data.find(b"\n", i, i + 200)
                end2 = data.find(b"\n", end + 1, end + 200) if end >= 0 else -1
                if end2 >= 0:
                    detail = f" {bytes(data[i:end]).decode('ascii', 'replace')[:80]}." \
                             f"{bytes(data[end + 1:end2]).decode('ascii', 'replace')[:80]}"
            elif op == 0x93 and len(stack) >= 2 and isinstance(stack[-2], str) and isinstance(stack[-1], str):
                detail = f" {stack[-2][:80]}.{stack[-1][:80]}"
            raise Refused(f"refused: the pickle asks for a class or function ({_CODE_OPS[op]}{detail}), but an "
                          "allocator snapshot holds only plain data (nothing in the file was run)")
        else:
            at = i - 1 + (window.base if window is not None else 0)
            raise Refused(f"opcode 0x{op:02x} at byte {at:,}: not a binary pickle of plain data")

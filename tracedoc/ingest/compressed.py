"""Compressed inputs (gzip, xz) and standard input: sniffed through their first bytes, unpacked bounded.

A compressed file is untrusted like any input: it is streamed in chunks (never whole in memory), wrapped as an
``Unpacking`` around the reader of its format: handed as the stream to readers that parse as it unpacks
(``load_stream``), saved into a file for the others, and unpacking stops with a one-line
error once its output passes a cap, so a few megabytes that would inflate to terabytes (a decompression bomb) cost
at most the cap in disk and seconds. The cap is the run's ``Limits.max_inflate_bytes`` (`--max-inflate`,
``TRACEDOC_MAX_INFLATE_BYTES``) when given, else the larger of 100 times the compressed size and 64 MiB: real
traces compress 2 to 40 times with gzip and up to about 70 with xz, and the floor lets a small trace compressed
better still be read, while a few hundred KB that unpack to gigabytes stop after 64 MiB. Standard input is not a
multiple of anything: it is spooled to a file under the given cap, else at most 4 GiB. Every decompressor failure
(isal's own error class, lzma's, a truncated stream) is bad input; a full disk while writing is said as such.
"""

from __future__ import annotations

import errno
import io
import lzma
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from isal import igzip, igzip_lib

from tracedoc.errors import InputError, TracedocError, first_line
from tracedoc.limits import MAX_INFLATE_ENV_VAR as ENV_VAR

DEFAULT_RATIO = 100
DEFAULT_FLOOR = 64 << 20
DEFAULT_STDIN_BYTES = 4 << 30
_MAGIC = {"gzip": b"\x1f\x8b", "xz": b"\xfd7zXZ\x00"}
_CHUNK = 4 << 20
# isal's stub declares IsalError an instance rather than a class
_DECODE_ERRORS: tuple[type[Exception], ...] = (  # type: ignore[assignment]
    OSError, EOFError, ValueError, igzip_lib.IsalError, lzma.LZMAError)


class InflateLimitError(InputError):
    """A compressed input unpacks to more bytes than the cap allows."""


def max_inflate_bytes(compressed_size: int, cap: int | None = None) -> int:
    """How many bytes a compressed input of ``compressed_size`` bytes may unpack to: ``cap`` when given (the run's
    ``Limits.max_inflate_bytes``), else a multiple of its size (with a floor), so that the work a compressed file
    causes stays bounded by the file."""
    return cap or max(DEFAULT_RATIO * compressed_size, DEFAULT_FLOOR)


def max_stdin_bytes(cap: int | None = None) -> int:
    """How many bytes standard input may hold: ``cap`` when given, else DEFAULT_STDIN_BYTES (its bytes are not
    amplified, so no multiple applies; the cap keeps the spooled copy from filling the disk)."""
    return cap or DEFAULT_STDIN_BYTES


def unpacked_name(path: Path) -> Path:
    """The name ``gunzip`` or ``unxz`` gives a compressed file's content: ``trace.json`` of ``trace.json.gz``."""
    return path.with_suffix("") if path.suffix.lower() in (".gz", ".xz") else path


def compression_of(start: bytes) -> str | None:
    """'gzip' or 'xz' when a file's first bytes are that format's magic, else None."""
    return next((kind for kind, magic in _MAGIC.items() if start.startswith(magic)), None)


def _open(path: Path, kind: str) -> io.BufferedIOBase:
    return igzip.open(path, "rb") if kind == "gzip" else lzma.open(path, "rb")


def head(path: Path, kind: str, size: int, name: Path | str | None = None) -> bytes:
    """The first ``size`` unpacked bytes of a compressed file (for sniffing its format)."""
    try:
        with _open(path, kind) as f:
            return f.read(size)
    except _DECODE_ERRORS as exc:
        raise InputError(f"{name or path}: corrupt or truncated {kind} ({first_line(exc)})") from None


def chunks(path: Path, kind: str, limit: int, name: Path | str | None = None) -> Iterator[bytes]:
    """The unpacked bytes of ``path`` in chunks as they come, stopping with InflateLimitError past ``limit`` bytes:
    for readers that parse a stream, so that nothing unpacked is kept whole on disk or in memory.

    ``name`` is how errors name the input (the file the user gave; ``path`` by default).
    """
    name = name or path
    try:
        with _open(path, kind) as src:
            total = 0
            while True:
                try:
                    chunk = src.read(_CHUNK)
                except _DECODE_ERRORS as exc:
                    raise InputError(f"{name}: corrupt or truncated {kind} ({first_line(exc)})") from None
                if not chunk:
                    return
                total += len(chunk)
                if total > limit:
                    raise InflateLimitError(f"{name}: {_too_large(limit)}")
                yield chunk
    except _DECODE_ERRORS as exc:  # opening the stream (its header) failed
        raise InputError(f"{name}: corrupt or truncated {kind} ({first_line(exc)})") from None


def size_hint(path: Path, kind: str) -> int | None:
    """The unpacked size a gzip file's trailer states (modulo 4 GiB, and untrusted: only for sizing work)."""
    if kind != "gzip" or path.stat().st_size < 18:
        return None
    with path.open("rb") as f:
        f.seek(-4, os.SEEK_END)
        return int.from_bytes(f.read(4), "little")


class Unpacking:
    """A compressed file's unpacked bytes as a stream (``ingest.base.ByteStream``), bounded by ``limit``: what ingest
    hands a reader that parses as it reads (``load_stream``), and what it saves into a file for one that needs a
    file. Errors name the input as the user gave it (``name``)."""

    def __init__(self, path: Path, kind: str, limit: int, name: Path) -> None:
        self.path, self.compression, self.limit, self.name = path, kind, limit, name

    @property
    def size_hint(self) -> int | None:
        """The unpacked size the container states, when it is plausible (never smaller than the file)."""
        hint = size_hint(self.path, self.compression)
        return hint if hint is not None and hint >= self.path.stat().st_size else None  # modulo 4 GiB, untrusted

    def chunks(self) -> Iterator[bytes]:
        """The unpacked bytes in chunks as they come."""
        return chunks(self.path, self.compression, self.limit, self.name)

    def head(self, size: int) -> bytes:
        """The first ``size`` unpacked bytes."""
        return head(self.path, self.compression, size, self.name)

    def save(self, out: Path) -> None:
        """Unpack it whole into ``out``."""
        inflate(self.path, self.compression, out, self.limit, self.name)


def inflate(path: Path, kind: str, out: Path, limit: int, name: Path | str | None = None) -> None:
    """Unpack ``path`` into ``out`` in chunks, stopping with InflateLimitError past ``limit`` bytes.

    ``name`` is how errors name the input (the file the user gave; ``path`` by default).
    """
    name = name or path
    try:
        with _open(path, kind) as src:
            _copy(src.readinto, out, limit, name, f"corrupt or truncated {kind}", f"decompressing {name}",
                  _too_large(limit))
    except _DECODE_ERRORS as exc:  # opening the stream (its header) failed
        out.unlink(missing_ok=True)
        raise InputError(f"{name}: corrupt or truncated {kind} ({first_line(exc)})") from None


def _too_large(limit: int) -> str:
    return (f"unpacks to more than {limit:,} bytes: refused as a likely decompression bomb (raise the cap with "
            f"--max-inflate SIZE or {ENV_VAR} to read it)")


def spool(stream: io.BufferedIOBase, out: Path, limit: int, name: str = "-") -> None:
    """Copy a stream (standard input) into ``out``, stopping with InflateLimitError past ``limit`` bytes."""
    _copy(stream.readinto, out, limit, name, "cannot read standard input", "saving standard input",
          f"more than {limit:,} bytes on standard input (raise the cap with --max-inflate SIZE or {ENV_VAR})")


def _copy(readinto: Callable[[memoryview], int | None], out: Path, limit: int, name: Path | str, bad_read: str,
          doing: str, too_large: str) -> None:
    """Copy chunks from ``readinto`` into ``out`` until the source ends; on any failure remove ``out``.

    Failures to read are the input's (``bad_read``); failures to write are the disk's (while ``doing``).
    """
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    written = 0
    try:
        with out.open("wb") as dst:
            while True:
                try:
                    n = readinto(view)
                except _DECODE_ERRORS as exc:
                    raise InputError(f"{name}: {bad_read} ({first_line(exc)})") from None
                if not n:
                    return
                written += n
                if written > limit:
                    raise InflateLimitError(f"{name}: {too_large}")
                dst.write(view[:n])
    except OSError as exc:  # reading failures became InputError above: this is opening, writing or closing
        out.unlink(missing_ok=True)
        raise _write_error(exc, out, doing) from None
    except BaseException:
        out.unlink(missing_ok=True)
        raise


def _write_error(exc: OSError, out: Path, doing: str) -> TracedocError:
    """A failed write of the unpacked copy: the disk's fault, not the input's."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return TracedocError(f"no space left in {out.parent} while {doing} (free some, or point "
                             "TRACEDOC_CACHE_DIR or TMPDIR elsewhere)")
    return TracedocError(f"cannot write in {out.parent} while {doing} ({first_line(exc)})")

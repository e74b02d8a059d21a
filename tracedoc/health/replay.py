"""Record NVML's answers as JSON and replay them, so the health checks run (and are tested) without a GPU.

A recording maps each query (its pynvml function and arguments) to the answers NVML gave, in order. A snapshot
asks each query once; a replay gives a query's answers in turn and then repeats the last one, so a snapshot also
replays as a steady telemetry stream. Errors are answers too (``{"error": kind, "message": ...}``): a machine
without a driver replays as one. A recording is input like any other: size-limited and validated on load.
"""

from __future__ import annotations

import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracedoc import strict_json
from tracedoc.errors import InputError, first_line
from tracedoc.formats import BY_NAME
from tracedoc.health.nvml import Backend, NvmlError, pynvml_version

FORMAT_TAG = "tracedoc-nvml-replay"
VERSION = 1
ENV_VAR = "TRACEDOC_NVML_REPLAY"
MAX_BYTES: int = BY_NAME["nvml"].max_bytes or 0  # the largest recording, declared with the nvml format
_TAG = re.compile(rb'^\s*\{\s*"format"\s*:\s*"' + FORMAT_TAG.encode() + rb'"')


def query_key(fn: str, args: tuple[Any, ...]) -> str:
    """How a query is named in a recording, e.g. ``nvmlDeviceGetClockInfo[0,1]``."""
    return fn + strict_json.dumps(list(args), separators=(",", ":"))


def is_recording(head: bytes) -> bool:
    """True when a file's first bytes are those of an NVML recording."""
    return _TAG.match(head) is not None


class Recorder:
    """A backend that passes queries to another and keeps every answer, to be saved as a recording."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.answers: dict[str, list[dict[str, Any]]] = {}

    def call(self, fn: str, *args: Any) -> Any:
        answers = self.answers.setdefault(query_key(fn, args), [])
        try:
            value = self.backend.call(fn, *args)
        except NvmlError as exc:
            answers.append({"error": exc.kind, "message": exc.message})
            raise
        answers.append({"value": value})
        return value

    def close(self) -> None:
        self.backend.close()

    def save(self, path: Path) -> None:
        """Write the recording; a temporary file renamed into place, so a failed write leaves no half file."""
        now = time.time_ns()
        head = {"format": FORMAT_TAG, "version": VERSION, "recorded_ns": now,
                "recorded_at": datetime.fromtimestamp(now / 1e9, UTC).isoformat(timespec="seconds"),
                "pynvml": pynvml_version()}
        # One query per line: small, and readable in a diff.
        body = ",\n".join(f"  {strict_json.dumps(k)}: {strict_json.dumps(v)}" for k, v in self.answers.items())
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
        tmp.write_text(strict_json.dumps(head)[:-1] + ', "answers": {\n' + body + "\n}}\n")
        os.replace(tmp, path)


class Replay:
    """A backend that answers from a recording instead of the driver."""

    def __init__(self, answers: dict[str, list[dict[str, Any]]], recorded_ns: int | None = None) -> None:
        self.answers = answers
        self.recorded_ns = recorded_ns
        self._asked: dict[str, int] = {}

    @classmethod
    def load(cls, path: Path) -> Replay:
        """Read and validate a recording; InputError (one line) when it is not one."""
        try:
            if path.stat().st_size > MAX_BYTES:
                raise InputError(f"{path}: larger than any NVML recording ({MAX_BYTES >> 20} MB)")
            raw = path.read_bytes()
        except OSError as exc:
            raise InputError(f"{path}: not a readable NVML recording ({first_line(exc)})") from None
        return cls.parse(raw, path)

    @classmethod
    def parse(cls, raw: bytes, path: Path) -> Replay:
        """Validate a recording's bytes (at most MAX_BYTES: the caller's), errors naming it as ``path``."""
        try:
            doc = strict_json.loads(raw)
        except ValueError as exc:
            raise InputError(f"{path}: not a readable NVML recording ({first_line(exc)})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT_TAG:
            raise InputError(f"{path}: not an NVML recording (no \"format\": \"{FORMAT_TAG}\")")
        if doc.get("version") != VERSION:
            raise InputError(f"{path}: NVML recording version {doc.get('version')!r}, tracedoc reads {VERSION}")
        answers = doc.get("answers")
        valid = isinstance(answers, dict) and all(
            isinstance(k, str) and isinstance(v, list) and v
            and all(isinstance(a, dict) and ("value" in a or isinstance(a.get("error"), str)) for a in v)
            for k, v in answers.items())
        if not valid or not isinstance(answers, dict):
            raise InputError(f"{path}: malformed NVML recording (answers must map queries to lists of answers)")
        # The reader counts devices with range(): a count of 2.5 (or "2") would fail there, not as bad input.
        counts = [a["value"] for a in answers.get(query_key("nvmlDeviceGetCount", ()), []) if "value" in a]
        if not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
            raise InputError(f"{path}: malformed NVML recording (the device count must be a whole number)")
        recorded_ns = doc.get("recorded_ns")
        return cls(answers, recorded_ns if isinstance(recorded_ns, int) and 0 <= recorded_ns < 2**63 else None)

    def call(self, fn: str, *args: Any) -> Any:
        key = query_key(fn, args)
        answers = self.answers.get(key)
        if answers is None:
            raise NvmlError("NotRecorded", f"{key} is not in the recording")
        i = self._asked.get(key, 0)
        self._asked[key] = i + 1
        answer = answers[min(i, len(answers) - 1)]
        if "error" in answer:
            raise NvmlError(answer["error"], str(answer.get("message") or ""))
        return answer["value"]

    def close(self) -> None:
        """Nothing to release."""

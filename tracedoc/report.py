"""Report: what tracedoc concluded about a set of inputs. Renderers and the dashboard only read it.

The JSON form is a contract (schema 1, see README): inputs, summary, findings ranked by estimated saving, metrics.
Fields added since are optional (a finding's ``span``), so a report of schema 1 reads the same either way. A saved
report re-renders without analysing again (``Report.from_json``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from tracedoc import strict_json
from tracedoc.version import __version__

if TYPE_CHECKING:
    from tracedoc.frames import Frames

REPORT_SCHEMA = 1
SEVERITIES = ("critical", "warning", "info")


@dataclass
class Scope:
    """Where a finding applies; unset fields do not apply."""

    rank: int | None = None
    device: int | None = None
    stream: int | None = None
    kernel: str | None = None
    step: int | None = None
    pg: str | None = None
    seq: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Evidence:
    """One measured number behind a finding."""

    name: str
    value: float | int | str | None
    unit: str = ""


@dataclass
class Span:
    """Where on its rank's timeline a finding lies: from ``start_ms`` after the rank's first recorded activity (the
    zero of 'ms into the trace') for ``dur_ms``. Set by the rules that declare a ``span``."""

    start_ms: float
    dur_ms: float


@dataclass
class Finding:
    """A judged problem: what, where, how much it costs and how to fix it."""

    rule: str
    severity: str
    title: str
    message: str
    impact_ms: float
    impact_pct: float
    scope: Scope = field(default_factory=Scope)
    evidence: list[Evidence] = field(default_factory=list)
    fix: str = ""
    references: list[str] = field(default_factory=list)
    part_of: int | None = None  # the number (1-based, as ranked) of the finding that already counts its time
    drawn_from: list[str] = field(default_factory=list)  # the attribution causes its saving was drawn from
    # Memory findings: the saving in bytes (impact_ms and impact_pct are 0: bytes are not time, and these findings
    # are ranked among themselves, after the time findings).
    impact_bytes: int | None = None
    # The time the finding is about on its rank's timeline, where its rule says (the timeline and the Perfetto
    # trace place it there; else by its step or its rank's window).
    span: Span | None = None
    # What its rule makes of it, for the pages and renderers (tracedoc.judge.rule.mark_kinds; not in the JSON, which
    # says what the rule found, not how to draw it): ``kind`` is 'saving' (its impact is the time fixing it is
    # estimated to save), 'hang' (its impact is the time waited: the job is stuck), 'health' (an informational
    # health finding: nothing broken) or 'memory' (its saving is in bytes); ``across_ranks``, whether it is about
    # ranks waiting for one another (a straggler, a hot expert).
    # A finding read back from JSON (``from_dict``) is a saving, or memory, until its rules say more
    # (``tracedoc.saved.read_report`` asks the built-in ones).
    kind: str = field(default="saving", compare=False)
    across_ranks: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if self.impact_bytes is not None:
            self.kind = "memory"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["kind"], d["across_ranks"]
        d["scope"] = self.scope.to_dict()
        for optional in ("part_of", "drawn_from", "impact_bytes", "span"):
            if d[optional] is None or d[optional] == []:
                del d[optional]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        span = d.get("span")
        return cls(**{**d, "scope": Scope(**d.get("scope", {})),
                      "evidence": [Evidence(**e) for e in d.get("evidence", [])],
                      "span": None if span is None else Span(**span)})


@dataclass
class InputInfo:
    """One analysed input file."""

    path: str
    format: str
    rank: int
    events: int


@dataclass
class Report:
    """Everything the renderers need."""

    # How a notebook draws a report (``_repr_html_``): set by the notebook face, tracedoc.notebook, when it loads
    # (tracedoc's public names load it: ``tracedoc.analyze``, ``tracedoc.Report``); the report imports no face.
    html_view: ClassVar[Callable[[Report], str] | None] = None

    inputs: list[InputInfo]
    summary: dict[str, Any]
    findings: list[Finding]
    metrics: dict[str, Any] = field(default_factory=dict)
    # Every GPU's time, attributed once: {rank, device, step, cause, detail, ms} rows summing per rank and device
    # to its window (empty without a GPU timeline).
    attribution: list[dict[str, Any]] = field(default_factory=list)
    # For the largest findings: the projected step time once fixed and what limits it next (tracedoc.whatif).
    what_if: list[dict[str, Any]] = field(default_factory=list)
    # The window the findings judge (trace.window): its kind, how its steps were found, its bounds, per rank too;
    # empty without a timeline.
    window: dict[str, Any] = field(default_factory=dict)
    # GPU memory per device (tracedoc.memory_report): peak, growth, top sites, fragmentation, OOMs; bytes. Empty
    # without allocator events or snapshots.
    memory: list[dict[str, Any]] = field(default_factory=list)
    # MFU, HFU, MBU per rank (step None: its steady steps) and step, with the peak and its source
    # (tracedoc.efficiency); empty where not measured.
    efficiency: list[dict[str, Any]] = field(default_factory=list)
    # The operator view: per rank, the aten ops with the most GPU time, their FLOPs, bytes and kernels.
    operators: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = {"tracedoc": __version__, "schema": REPORT_SCHEMA,
               "inputs": [asdict(i) for i in self.inputs], "summary": self.summary,
               "window": self.window, "findings": [f.to_dict() for f in self.findings],
               "attribution": self.attribution, "what_if": self.what_if}
        if self.efficiency:
            out["efficiency"] = self.efficiency
        if self.operators:
            out["operators"] = self.operators
        out["metrics"] = self.metrics
        if self.memory:  # memory findings' savings are bytes (impact_bytes), never added to time
            out["memory"] = self.memory
        return out

    @property
    def input_count(self) -> int:
        """How many input files the report read (a file holding several ranks lists each of them)."""
        return len({i.path for i in self.inputs})

    def what_if_for(self, number: int) -> dict[str, Any] | None:
        """The projection of finding ``number`` (1-based), when the report carries one."""
        return next((w for w in self.what_if if w.get("finding") == number), None)

    def to_json(self, indent: int | None = 2) -> str:
        return strict_json.dumps(self.to_dict(), indent=indent, default=strict_json.plain_number)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Report:
        return cls(inputs=[InputInfo(**i) for i in d["inputs"]], summary=d["summary"],
                   findings=[Finding.from_dict(f) for f in d["findings"]], metrics=d.get("metrics", {}),
                   attribution=d.get("attribution", []), what_if=d.get("what_if", []), window=d.get("window") or {},
                   memory=d.get("memory") or [], efficiency=d.get("efficiency") or [],
                   operators=d.get("operators") or [])

    @classmethod
    def from_json(cls, text: str) -> Report:
        return cls.from_dict(json.loads(text))

    @property
    def frames(self) -> Frames:
        """The findings, the attribution and every metric as polars DataFrames, by name (tracedoc.frames)."""
        from tracedoc.frames import Frames

        return Frames(self)

    def _repr_html_(self) -> str | None:
        """The overview a notebook shows for a report (headline, findings, where the time went), drawn by the
        notebook face once it is loaded (``html_view``); before, None: the plain text representation."""
        return None if Report.html_view is None else Report.html_view(self)

    def worst_severity(self) -> str | None:
        """The most severe finding's severity, or None without findings."""
        present = {f.severity for f in self.findings}
        return next((s for s in SEVERITIES if s in present), None)


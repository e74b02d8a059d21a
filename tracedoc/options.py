"""What one analysis run is judged by, as one frozen value: the rules (the user's rule folders beside the built-in
ones), the thresholds --set changes, the range that marks a step, the peaks, FLOPs and bytes per step and the step
time the user gives, the memory and inflate limits, and the rule whose fix the report projects (--what-if).

The faces build it once (the command line's one decorator for `analyze`, `serve` and `diff`, ``tracedoc.api.analyze``
from its keyword arguments) and it travels whole: to ``pipeline.load_report``/``build_report``, the dashboard, both
sides of a diff and every task a distributed run sends to its workers. Nothing here reads a file or a store.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from tracedoc.errors import InputError
from tracedoc.limits import Limits


@dataclass(frozen=True)
class Peaks:
    """What the user gives where the trace lacks it: ``--peak-tflops``/``--peak-gbps`` (a GPU the peak table
    lacks; they override it for every dtype), ``--flops-per-step``/``--bytes-per-step`` (a trace without
    shapes, CUDA graphs) and ``--step-time-ms`` (the step time of the user's own logs, without the profiler: MFU
    and MBU divide by it). Each given value is a positive, finite number (else an InputError)."""

    peak_tflops: float | None = None
    peak_gbps: float | None = None
    flops_per_step: float | None = None
    bytes_per_step: float | None = None
    step_time_ms: float | None = None

    def __post_init__(self) -> None:
        for name, value in self.given().items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                    or value <= 0:
                unit = " of milliseconds" if name == "step_time_ms" else ""
                flag = name.replace("_", "-")
                raise InputError(f"{name} (--{flag}): {value!r} is not a positive number{unit}")
            object.__setattr__(self, name, float(value))

    def given(self) -> dict[str, float]:
        """The values given, by name (the SQL variables efficiency.peaks and efficiency.steps read)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    @property
    def user_flops(self) -> bool:
        return self.flops_per_step is not None or self.bytes_per_step is not None


@dataclass(frozen=True)
class AnalysisOptions:
    """One analysis run's options. ``rules_dirs``: folders of extra rule files (--rules; a rule with a built-in's
    id replaces it). ``thresholds``: {rule: {threshold: value}} (--set; the pipeline checks that they name rules and
    thresholds that exist). ``step_range``: the host range that marks a step (--step-range; None: tracedoc finds the
    steps). ``peaks``: what the user gives of peaks, work per step and step time (None: nothing). ``limits``: the
    memory and inflate caps of every store and reader of the run, the workers' too (by default those the
    environment sets). ``what_if``: the rule whose largest finding's projection the report carries (--what-if)."""

    rules_dirs: tuple[Path, ...] = ()
    thresholds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    step_range: str | None = None
    peaks: Peaks | None = None
    limits: Limits = field(default_factory=Limits.from_env)
    what_if: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "rules_dirs", tuple(Path(d) for d in self.rules_dirs))
        object.__setattr__(self, "thresholds", {rule: dict(values) for rule, values in (self.thresholds or {}).items()})

    def needs_traces(self) -> list[str]:
        """What of these options only an analysis of the traces can honour (a saved report is rendered as it is):
        the options as the command line names them."""
        given = (("--set", bool(self.thresholds)), ("--step-range", self.step_range is not None),
                 ("the peaks or FLOPs per step", self.peaks is not None))
        return [what for what, named in given if named]

    def refuse_saved(self, label: str, also: tuple[str, ...] = ()) -> None:
        """An InputError when a saved report (at ``label``) is given with options that need its traces (``also``:
        more such things the caller was given)."""
        needs = [*self.needs_traces(), *also]
        if needs:
            raise InputError(f"{label}: a saved report is rendered as it is; give the traces for {', '.join(needs)}")

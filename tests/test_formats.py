"""Each input format is declared once (tracedoc/formats.py FORMATS): its reader module exists and names it;
ingest and the run kinds read that one list, and what each format declares it gives (operator shapes, the job's
size, memory events, host ranges, Python stacks, how to record it) is what its samples show and what the analyses
conclude from them. The analyses say what they read in their headers (store.modules)."""

from __future__ import annotations

import ast
import gzip
import importlib
import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, SAMPLES
from tracedoc import analyze, kinds
from tracedoc.diff.side import check_kinds, resolve_side
from tracedoc.errors import InputError
from tracedoc.formats import (
    BY_NAME,
    CAPABILITIES,
    FORMATS,
    HANG_DUMPS,
    HEALTH,
    KERNEL_PROFILE,
    NVTX,
    PYTORCH_OPERATORS,
    RUN_KINDS,
    TIMELINE,
    Format,
    giving,
)
from tracedoc.ingest import FORMATS as READERS
from tracedoc.ingest import compressed, discover, reader
from tracedoc.ingest.base import (
    PreparesFiles,
    Reader,
    ReadsMany,
    ReadsStream,
    SetsAsideInDirectory,
)
from tracedoc.pipeline import open_store
from tracedoc.store import Store
from tracedoc.store.modules import facts, on_client


def test_every_declared_format_has_its_reader() -> None:
    assert list(READERS) == [f.name for f in FORMATS]
    for f in FORMATS:
        assert f.name == importlib.import_module(f.module).FORMAT


def test_the_type_checker_holds_every_declared_reader_to_the_contract() -> None:
    """Each declared format's module is named in ingest's ``_READERS`` (read only by the type checker, so read here
    from the source): a module left out would no longer be checked against ``Reader``."""
    tree = ast.parse((ROOT / "tracedoc" / "ingest" / "__init__.py").read_text())
    readers = next(node.value for node in ast.walk(tree) if isinstance(node, ast.AnnAssign)
                   and isinstance(node.target, ast.Name) and node.target.id == "_READERS")
    assert isinstance(readers, ast.Tuple)
    imported = {alias.asname or alias.name: f"{node.module}.{alias.name}" for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert sorted(imported[e.id] for e in readers.elts if isinstance(e, ast.Name)) == sorted(f.module for f in FORMATS)


def _parameters(function: Callable[..., object]) -> list[tuple[str, bool]]:
    """A function's parameters (self left out): each name and whether it is required."""
    return [(p.name, p.default is inspect.Parameter.empty) for p in inspect.signature(function).parameters.values()
            if p.name != "self"]


@pytest.mark.parametrize("declared", FORMATS, ids=lambda f: f.name)
def test_every_reader_module_keeps_the_reader_contract(declared: Format) -> None:
    """Each declared format's module has the Reader members, and each optional member it has takes the parameters
    its protocol states (the type checker checks the types; this catches a format missing from its list)."""
    module = importlib.import_module(declared.module)
    assert isinstance(module, Reader)
    for protocol, member in ((Reader, "sniff"), (Reader, "load"), (ReadsMany, "load_many"),
                             (ReadsStream, "load_stream"), (PreparesFiles, "prepare"),
                             (SetsAsideInDirectory, "redundant_in_directory")):
        if hasattr(module, member):
            assert _parameters(getattr(module, member)) == _parameters(getattr(protocol, member)), member


def test_the_readers_offer_what_their_formats_need() -> None:
    """PyTorch ranks and Proton traces (one shared reader) are parsed together and as they unpack; a compressed
    flight-recorder dump, allocator snapshot, NVML recording or GEMM ladder is read from its stream; an Nsight Compute
    input unpacks itself (so that its errors and hints name the user's file); Nsight Systems reports are exported
    together first and an export beside its report is set aside; Parquet telemetry, read by seeking, is the one format a
    compressed file of which is unpacked to a file for it."""
    offered = {}
    for f in FORMATS:
        found = reader(f.name)
        members = {"many": found.many, "streamed": found.streamed, "prepares": found.prepares,
                   "sets_aside": found.sets_aside}
        offered[f.name] = tuple(name for name, member in members.items() if member is not None)
    assert offered.pop("torch") == ("many", "streamed")
    assert offered.pop("proton") == ("many", "streamed")
    assert offered.pop("ncu") == ("streamed",)
    assert offered.pop("flight_recorder") == ("streamed",)
    assert offered.pop("memory_snapshot") == offered.pop("nvml") == offered.pop("gemm_ladder") == ("streamed",)
    assert offered.pop("nsys") == ("prepares", "sets_aside")
    assert offered == {"telemetry": ()}


@pytest.mark.parametrize(("sample", "table"), [("health-h100/nvml-idle.replay.json", "gpu_health"),
                                               ("ncu-h100-gemm-cublas/gemm_ladder.json", "gemm_ladder_results")])
def test_a_compressed_small_file_is_read_from_its_stream(sample: str, table: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A gzipped NVML recording or GEMM ladder gives the rows its plain file gives, and is never unpacked to a
    file."""
    plain = SAMPLES / sample
    packed = tmp_path / f"{plain.name}.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))

    def rows(path: Path) -> list[tuple]:
        store = open_store(discover([path]), None)[0]
        try:
            return store.con.execute(f"SELECT * EXCLUDE (source_id) FROM {table} ORDER BY ALL").fetchall()
        finally:
            store.close()

    expected = rows(plain)
    monkeypatch.setattr(compressed.Unpacking, "save", lambda self, out: pytest.fail(f"{self.name} unpacked"))
    assert rows(packed) == expected and expected


@pytest.mark.parametrize("declared", FORMATS, ids=lambda f: f.name)
def test_the_run_kinds_follow_the_declarations(declared: Format) -> None:
    """A format's inputs are a run of its kind, whatever rides along; a distributed run never splits by rank a kernel
    profile or what rides along; only timelines say how to record their GPU activity."""
    assert kinds.kind_of([declared.name]) == declared.kind
    for other in FORMATS:
        ride_along = [f.name for f in (declared, other) if f.kind not in RUN_KINDS]
        expected = declared.kind if ride_along == [other.name] else None
        if expected:
            assert kinds.kind_of([declared.name, other.name]) == expected
    if declared.kind not in (TIMELINE, HANG_DUMPS):
        assert not declared.distributable
    assert (declared.how_to_record is not None) == (declared.kind == TIMELINE)


def test_an_unknown_format_rides_along() -> None:
    assert kinds.kind_of(["not_a_format"]) == HEALTH
    with pytest.raises(ValueError, match="unknown capability"):
        giving("shapes")
    assert kinds.mixed_runs([("not_a_format", 0), ("torch", 1)]) is None


# The samples of each format that show what it gives (its sample when it gives nothing): a new format's line in
# FORMATS needs its sample here.
SAMPLES_OF = {
    "proton": ("proton-compiled-mlp",),  # GPU kernels alone
    "torch": ("memory-leak", "ddp-straggler"),  # shapes, memory, Python stacks; the job's size
    "flight_recorder": ("hang-4rank-stuck",),  # names its largest group's size: not the job's
    "nsys": ("nsys-memory-leak",),  # CUDA memory, NVTX ranges
    "ncu": ("ncu-h100-gemm-cublas",),
    "nvml": ("health-h100",),
    "telemetry": ("health-h100",),
    "gemm_ladder": ("ncu-h100-gemm-cublas",),
    "memory_snapshot": ("snapshot-leak-default",),
}


@pytest.fixture(scope="module")
def sample_stores() -> Iterator[dict[str, Store]]:
    """Each sample of SAMPLES_OF ingested, without the cache."""
    names = sorted({s for samples in SAMPLES_OF.values() for s in samples})
    stores = {name: open_store(discover([SAMPLES / name]), None)[0] for name in names}
    yield stores
    for store in stores.values():
        store.close()


def _shown(store: Store, fmt: str, sql: str) -> Any:
    """``sql``'s first value, with ``$fmt`` the format's name."""
    return store.scalar(sql, {"fmt": fmt})


# What shows, in a store, that a source's format gave each capability: a count of rows, or a set of values.
_EVIDENCE = {
    "operator_shapes": "SELECT count(*) FROM op_shapes JOIN sources USING (source_id) WHERE format = $fmt",
    "python_stacks": """SELECT count(*) FROM cpu_activity JOIN sources USING (source_id)
                        WHERE format = $fmt AND kind = 'python'""",
    "memory_events": "SELECT count(*) FROM memory_events JOIN sources USING (source_id) WHERE format = $fmt",
}


def test_the_samples_cover_every_format() -> None:
    assert set(SAMPLES_OF) == {f.name for f in FORMATS}
    assert set(_EVIDENCE) | {"world_size", "host_ranges", "how_to_record", "profiler_k", "profiler_k_least"} == set(
        CAPABILITIES)


@pytest.mark.parametrize("declared", FORMATS, ids=lambda f: f.name)
def test_a_format_gives_what_it_declares_and_the_analyses_read_it(declared: Format,
                                                                  sample_stores: dict[str, Store]) -> None:
    """On its samples, a format's sources hold operator shapes, Python frames and memory events exactly when it
    declares them; the memory curve's basis is what it declares its memory events count; the summary's world
    size is read only from formats that give it (a flight-recorder dump names its largest group's size, not the
    job's); PyTorch operator ranges make the trace a PyTorch program's, NVTX ranges show as such; a timeline
    without GPU activity is told how its format records it."""
    stores = [sample_stores[name] for name in SAMPLES_OF[declared.name]]
    fmt = declared.name
    for capability, sql in _EVIDENCE.items():
        shown = [_shown(store, fmt, sql) for store in stores]
        assert bool(getattr(declared, capability)) == any(shown), capability
    bases = []
    for store in stores:
        store.include("trace.summary")
        store.include("trace.framework")
        sizes = _shown(store, fmt, "SELECT max(world_size) FROM sources WHERE format = $fmt")
        if sizes is not None:
            assert (store.scalar("SELECT world_size FROM trace_summary") == sizes) == declared.world_size
        if declared.memory_events:
            store.include("memory.timeline")
            bases += _shown(store, fmt, """SELECT list(DISTINCT basis) FROM memory_by_device JOIN sources
                                           USING (source_id) WHERE format = $fmt""") or []
        if declared.kind == TIMELINE:
            pytorch = _shown(store, fmt, """SELECT bool_and(pytorch) FROM trace_framework JOIN sources USING
                                            (source_id) WHERE format = $fmt""")
            assert pytorch or declared.host_ranges != PYTORCH_OPERATORS
            advice = _shown(store, fmt, """SELECT list(DISTINCT how_to_record) FROM trace_recording
                                          WHERE format = $fmt""")
            assert advice == [declared.how_to_record]
    assert set(bases) == ({declared.memory_events} if declared.memory_events else set())
    nvtx = [_shown(store, fmt, "SELECT count(*) FROM nvtx_ranges JOIN sources USING (source_id) WHERE format = $fmt")
            for store in stores]
    operators = [_shown(store, fmt, """SELECT count(*) FROM cpu_activity JOIN sources USING (source_id)
                                       WHERE format = $fmt AND name LIKE 'aten::%'""") for store in stores]
    assert any(nvtx) == (declared.host_ranges == NVTX)
    assert any(operators) == (declared.host_ranges == PYTORCH_OPERATORS)


def test_a_module_applies_where_the_tables_its_header_reads_have_rows() -> None:
    """The analyses run for the inputs that wrote what their headers say they read (``-- reads:``), and those
    that compare ranks (``-- scope: ranks``) only for several ranks."""
    assert facts("ncu.cublas_ceiling").reads == ("ncu_kernels", "gemm_ladder_results")
    assert on_client("trace.summary") and on_client("ranks.stragglers") and not on_client("gpu.idle")
    stores = {name: open_store(discover([SAMPLES / name / file]), None)[0] for name, file in (
        ("hang-2rank-stuck-notiming", ""), ("memory-leak", "trace.json.gz"), ("decode-eager", ""))}
    try:
        hang, memory, eager = stores.values()
        assert hang.applies("hang.progress") and not hang.applies("memory.timeline")
        assert memory.applies("memory.report") and memory.applies("gpu.idle")
        assert not memory.applies("hang.progress") and not memory.applies("ranks.stragglers")  # one rank
        assert not eager.applies("memory.timeline") and not eager.applies("ncu.sol")
        assert not hang.applies("attribution.time") and hang.applies("trace.summary")  # no timeline there
    finally:
        for store in stores.values():
            store.close()


def test_a_compressed_file_is_unpacked_no_further_than_its_format_declares(tmp_path: Path) -> None:
    """The GEMM ladder declares 16 MiB: a gzipped file that sniffs as one and unpacks to more is refused."""
    path = tmp_path / "ladder.json.gz"
    path.write_bytes(gzip.compress(b'{"format": "tracedoc-gemm-ladder", "rungs": []' + b" " * (17 << 20) + b"}"))
    with pytest.raises(InputError, match=r"unpacks to more than 16,777,216 bytes, larger than any gemm_ladder file"):
        analyze([path], use_cache=False)


@pytest.mark.parametrize("declared", [f for f in FORMATS if f.kind not in (TIMELINE, KERNEL_PROFILE)],
                         ids=lambda f: f.name)
def test_a_diff_refuses_two_runs_without_steps_or_kernels(declared: Format) -> None:
    """Two runs of a kind that holds no steps or kernels (hang dumps, and each kind that rides along) are refused
    in the words of that kind; a run of it against a run of another kind is refused as two kinds."""
    alone = [name for name in SAMPLES_OF[declared.name]
             if {kinds.kind_of([i.format]) for i in discover([SAMPLES / name])} == {declared.kind}]
    if not alone:
        pytest.skip(f"no sample holds {declared.kind} alone")
    side = resolve_side(SAMPLES / alone[0])
    with pytest.raises(InputError, match=f"both sides are {declared.kind}: they hold no steps or kernels"):
        check_kinds(side, side)
    other = resolve_side(SAMPLES / "decode-compile")
    with pytest.raises(InputError, match=f"AFTER a {declared.kind} .*: diff compares two runs of one kind"):
        check_kinds(other, side)


# A format column or field compared with a literal in SQL: `format = 'x'`, `'x' <> s.format`, `format IN ('x', ...)`,
# `CASE format WHEN 'x'`.
_SQL_COMPARED = (re.compile(r"\bformat\s*(?:==?|<>|!=)\s*('\w+')", re.IGNORECASE),
                 re.compile(r"('\w+')\s*(?:==?|<>|!=)\s*(?:\w+\.)?format\b", re.IGNORECASE),
                 re.compile(r"\bformat\s+(?:NOT\s+)?IN\s*\(([^)]*)\)", re.IGNORECASE),
                 re.compile(r"\bformat\s+WHEN\s+('\w+')", re.IGNORECASE))


def _format_names_in_sql(sql: str) -> set[str]:
    """The declared format names ``sql`` (comments left out) compares a format column with."""
    code = re.sub(r"--[^\n]*", "", sql)
    compared = " ".join(found for pattern in _SQL_COMPARED for found in pattern.findall(code))
    return set(re.findall(r"'(\w+)'", compared)) & set(BY_NAME)


def _is_about_formats(node: ast.AST) -> bool:
    """An expression that reads a format: a name, attribute, key or call spelling ``format`` (or ``fmt``)."""
    for part in ast.walk(node):
        spelled = (part.id if isinstance(part, ast.Name) else part.attr if isinstance(part, ast.Attribute)
                   else part.value if isinstance(part, ast.Constant) and isinstance(part.value, str)
                   and isinstance(getattr(part, "parent", None), ast.Subscript) else "")
        if "format" in spelled.lower() or spelled == "fmt":
            return True
    return False


def _format_names(node: ast.AST) -> set[str]:
    """The declared format names a literal (a string, or a tuple, list or set of them) spells."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return {i.value for i in items if isinstance(i, ast.Constant) and i.value in BY_NAME}


def format_name_comparisons(source: str, suffix: str) -> set[str]:
    """The declared format names a module compares a format with: in SQL (a ``.sql`` module, or a string in a
    Python one), or in Python (``fmt == "torch"``, ``"nsys" in store.formats()``)."""
    if suffix == ".sql":
        return _format_names_in_sql(source)
    tree = ast.parse(source)
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child.parent = node  # type: ignore[attr-defined]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found |= _format_names_in_sql(node.value)
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_is_about_formats(o) for o in operands):
                found |= {name for o in operands for name in _format_names(o)}
    return found


def test_the_format_name_check_finds_a_comparison() -> None:
    """What the check below looks for, shown on the comparisons it replaced."""
    assert format_name_comparisons("SELECT 1 FROM sources s WHERE s.format = 'ncu'", ".sql") == {"ncu"}
    assert format_name_comparisons("SELECT * FROM sources WHERE format IN ('torch', 'x') -- 'nsys'", ".sql") == \
        {"torch"}
    assert format_name_comparisons("-- format = 'torch'\nSELECT 'telemetry' AS basis", ".sql") == set()
    assert format_name_comparisons('ok = source["format"] == "nsys" or "torch" in store.formats()', ".py") == \
        {"nsys", "torch"}
    assert format_name_comparisons('rows = con.sql("SELECT 1 WHERE src.format <> \'torch\'")', ".py") == {"torch"}
    assert format_name_comparisons('ok = profiler in ("nsys", "ncu")', ".py") == set()


def test_no_analysis_or_page_compares_a_format_name() -> None:
    """Outside ingest and the declaration itself, code chooses inputs by what their format declares it gives
    (``input_formats``, tracedoc.formats.giving) or by its kind, never by the format's name: a new format with the
    same capabilities is then analysed without an edit."""
    package = ROOT / "tracedoc"
    offenders = {}
    for path in sorted([*package.rglob("*.sql"), *package.rglob("*.py")]):
        if path.is_relative_to(package / "ingest") or path == package / "formats.py":
            continue
        if names := format_name_comparisons(path.read_text(), path.suffix):
            offenders[str(path.relative_to(ROOT))] = sorted(names)
    assert offenders == {}

"""Read NVML into plain rows: a health snapshot of every GPU, or one telemetry sample of each.

Every NVML query goes through a ``Backend``: the live library (``LiveNvml``), a recorder around it or a replay of
recorded answers (``tracedoc.health.replay``). A query is named by its pynvml function and plain integer arguments,
the device given by its index, so that what a GPU machine answered can be replayed anywhere. Answers are plain
JSON values (structures become dicts), whatever the backend. Units: clocks MHz, power W, temperatures °C, memory
bytes, times ns; each row's keys are the columns of the store tables in ``ingest/health/schema_health.sql``.
"""

from __future__ import annotations

import contextlib
import ctypes
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pynvml

from tracedoc.errors import InputError, TracedocError

# NVML's enums, named once (values from nvml.h, as pynvml defines them).
_CLOCK_GRAPHICS, _CLOCK_SM, _CLOCK_MEM = pynvml.NVML_CLOCK_GRAPHICS, pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM
_CORRECTED, _UNCORRECTED = pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
_VOLATILE, _AGGREGATE = pynvml.NVML_VOLATILE_ECC, pynvml.NVML_AGGREGATE_ECC
_NVLINK_COUNTERS = {
    "replay_errors": pynvml.NVML_NVLINK_ERROR_DL_REPLAY,
    "recovery_errors": pynvml.NVML_NVLINK_ERROR_DL_RECOVERY,
    "crc_flit_errors": pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT,
    "crc_data_errors": pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA,
}
_MAX_GPUS = 1024
# nvmlDevice* queries that take no device.
_SYSTEM_CALLS = {"nvmlDeviceGetCount"}
# nvmlNvlinkVersion_t values as NVLink versions.
_NVLINK_VERSIONS = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}
# NVML answers these when a link index does not exist on the device: the end of its links.
_NO_SUCH_LINK = {"InvalidArgument", "NotSupported", "NotFound"}


class NvmlError(Exception):
    """An NVML query failed; ``kind`` is pynvml's error class without its prefix (e.g. 'NotSupported')."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}" if message and message != kind else kind)
        self.kind = kind
        self.message = message


class NoGpuError(TracedocError):
    """NVML cannot be used on this machine: no driver, no library or no GPU (one line, exit code 2)."""


class Backend(Protocol):
    """Answers NVML queries: ``call('nvmlDeviceGetClockInfo', 0, 1)`` queries device 0's SM clock."""

    def call(self, fn: str, *args: Any) -> Any: ...

    def close(self) -> None: ...


class LiveNvml:
    """The NVML library of this machine's driver, through pynvml."""

    def __init__(self) -> None:
        self._handles: dict[int, Any] = {}

    def call(self, fn: str, *args: int) -> Any:
        try:
            func = getattr(pynvml, fn)
        except AttributeError:
            raise NvmlError("FunctionNotFound", f"pynvml {pynvml_version()} has no {fn}") from None
        try:
            if fn.startswith("nvmlDevice") and fn not in _SYSTEM_CALLS:
                return plain(func(self._handle(args[0]), *args[1:]))
            return plain(func(*args))
        except pynvml.NVMLError as exc:
            raise NvmlError(type(exc).__name__.removeprefix("NVMLError_"), str(exc)) from None
        except (ArithmeticError, AttributeError, LookupError, TypeError, ValueError) as exc:
            # pynvml and the driver disagree about a call (older bindings, a changed structure): no answer
            raise NvmlError("BindingError", f"{fn}: {exc}") from None

    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            self._handles[index] = pynvml.nvmlDeviceGetHandleByIndex(index)
        return self._handles[index]

    def close(self) -> None:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def pynvml_version() -> str:
    """The installed nvidia-ml-py's version, for recordings."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nvidia-ml-py")
    except PackageNotFoundError:
        return "unknown"


def plain(value: Any) -> Any:
    """A pynvml answer as JSON values: ctypes structures and unions become dicts, arrays lists, bytes text."""
    if isinstance(value, ctypes.Structure | ctypes.Union):
        return {name: plain(getattr(value, name)) for name, *_ in value._fields_}
    if isinstance(value, ctypes.Array):
        return plain(bytes(value).split(b"\0", 1)[0]) if value._type_ is ctypes.c_char else [plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if hasattr(value, "value") and isinstance(value, ctypes._SimpleCData):
        return value.value
    return value


@dataclass
class Snapshot:
    """One reading of every GPU: ``gpus`` rows for gpu_health, ``nvlinks`` rows for gpu_health_nvlink."""

    gpus: list[dict[str, Any]] = field(default_factory=list)
    nvlinks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def driver_version(self) -> str | None:
        return self.gpus[0]["driver_version"] if self.gpus else None


class _Reader:
    """Queries one backend; optional answers that NVML does not give come back as None."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def get(self, fn: str, *args: Any) -> Any:
        try:
            return self.backend.call(fn, *args)
        except NvmlError:
            return None

    def integer(self, fn: str, *args: int, scale: float = 1) -> int | None:
        return _as_int(self.get(fn, *args), scale)

    def number(self, fn: str, *args: int, scale: float = 1) -> float | None:
        value = self.get(fn, *args)
        return value * scale if _is_number(value) else None


def start(backend: Backend) -> int:
    """Initialise NVML and return the number of GPUs; NoGpuError when there is no usable driver or GPU."""
    try:
        backend.call("nvmlInit")
        count = backend.call("nvmlDeviceGetCount")
    except NvmlError as exc:
        raise NoGpuError(f"no NVIDIA GPU/driver found (NVML: {exc.message or exc.kind})") from None
    if _as_int(count) is None or count < 1:
        raise NoGpuError("no NVIDIA GPU/driver found (NVML: no devices)")
    if count > _MAX_GPUS:
        raise InputError(f"NVML reports {count} GPUs, more than any machine has")
    return count


def read_snapshot(backend: Backend, taken_ns: int | None = None) -> Snapshot:
    """Every GPU's identity, clocks, throttle reasons, temperatures, power, ECC, PCIe and NVLink state.

    ``taken_ns`` is when the answers were given (ns since the epoch); now, unless they come from a recording.
    """
    count = start(backend)
    r = _Reader(backend)
    cuda = r.integer("nvmlSystemGetCudaDriverVersion")
    system = {
        "driver_version": _as_str(r.get("nvmlSystemGetDriverVersion")),
        "cuda_driver_version": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
        "nvml_version": _as_str(r.get("nvmlSystemGetNVMLVersion")),
        "gpu_count": count,
        "taken_ns": taken_ns if taken_ns is not None else time.time_ns(),
    }
    snapshot = Snapshot()
    for device in range(count):
        snapshot.gpus.append({**system, **_read_gpu(backend, r, device)})
        if snapshot.gpus[-1]["nvml_error"] is None:
            snapshot.nvlinks.extend(_read_nvlinks(r, device))
    return snapshot


def _read_gpu(backend: Backend, r: _Reader, d: int) -> dict[str, Any]:
    """One gpu_health row (without the system columns)."""
    row: dict[str, Any] = {"device": d, "nvml_error": None}
    try:
        row["name"] = _as_str(backend.call("nvmlDeviceGetName", d))
    except NvmlError as exc:  # e.g. GpuIsLost: the GPU fell off the bus
        row.update(name=None, nvml_error=exc.kind)
        return row
    pci = r.get("nvmlDeviceGetPciInfo", d)
    cc = r.get("nvmlDeviceGetCudaComputeCapability", d)
    ecc_mode = r.get("nvmlDeviceGetEccMode", d)
    remap = r.get("nvmlDeviceGetRemappedRows", d)
    util = r.get("nvmlDeviceGetUtilizationRates", d)
    mem = r.get("nvmlDeviceGetMemoryInfo", d)
    limits = r.get("nvmlDeviceGetPowerManagementLimitConstraints", d)
    retired = {cause: r.get("nvmlDeviceGetRetiredPages", d, cause) for cause in (0, 1)}
    row.update(
        uuid=_as_str(r.get("nvmlDeviceGetUUID", d)),
        pci_bus_id=_as_str(_field(pci, "busId")),
        compute_capability=f"{cc[0]}.{cc[1]}" if _pair(cc) else None,
        pstate=r.integer("nvmlDeviceGetPerformanceState", d),
        persistence_mode=_as_bool(r.get("nvmlDeviceGetPersistenceMode", d)),
        sm_clock_mhz=r.integer("nvmlDeviceGetClockInfo", d, _CLOCK_SM),
        sm_clock_max_mhz=r.integer("nvmlDeviceGetMaxClockInfo", d, _CLOCK_SM),
        mem_clock_mhz=r.integer("nvmlDeviceGetClockInfo", d, _CLOCK_MEM),
        mem_clock_max_mhz=r.integer("nvmlDeviceGetMaxClockInfo", d, _CLOCK_MEM),
        graphics_clock_mhz=r.integer("nvmlDeviceGetClockInfo", d, _CLOCK_GRAPHICS),
        app_sm_clock_mhz=r.integer("nvmlDeviceGetApplicationsClock", d, _CLOCK_SM),
        clocks_event_reasons=_reasons(r, d),
        power_violation_ns=_as_int(_field(r.get("nvmlDeviceGetViolationStatus", d, 0), "violationTime")),
        thermal_violation_ns=_as_int(_field(r.get("nvmlDeviceGetViolationStatus", d, 1), "violationTime")),
        gpu_util_pct=_as_int(_field(util, "gpu")),
        mem_util_pct=_as_int(_field(util, "memory")),
        memory_total_bytes=_as_int(_field(mem, "total")),
        memory_used_bytes=_as_int(_field(mem, "used")),
        temperature_c=r.integer("nvmlDeviceGetTemperature", d, pynvml.NVML_TEMPERATURE_GPU),
        temperature_slowdown_c=r.integer("nvmlDeviceGetTemperatureThreshold", d,
                                         pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
        temperature_shutdown_c=r.integer("nvmlDeviceGetTemperatureThreshold", d,
                                         pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
        temperature_max_c=r.integer("nvmlDeviceGetTemperatureThreshold", d, pynvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX),
        memory_temperature_c=_memory_temperature(r, d),
        memory_temperature_max_c=r.integer("nvmlDeviceGetTemperatureThreshold", d,
                                           pynvml.NVML_TEMPERATURE_THRESHOLD_MEM_MAX),
        power_w=r.number("nvmlDeviceGetPowerUsage", d, scale=1e-3),
        power_limit_w=r.number("nvmlDeviceGetEnforcedPowerLimit", d, scale=1e-3),
        power_default_limit_w=r.number("nvmlDeviceGetPowerManagementDefaultLimit", d, scale=1e-3),
        power_max_limit_w=limits[1] * 1e-3 if _pair(limits) else None,
        ecc_enabled=_as_bool(ecc_mode[0]) if _pair(ecc_mode) else None,
        ecc_pending_enabled=_as_bool(ecc_mode[1]) if _pair(ecc_mode) else None,
        ecc_volatile_corrected=r.integer("nvmlDeviceGetTotalEccErrors", d, _CORRECTED, _VOLATILE),
        ecc_volatile_uncorrected=r.integer("nvmlDeviceGetTotalEccErrors", d, _UNCORRECTED, _VOLATILE),
        ecc_aggregate_corrected=r.integer("nvmlDeviceGetTotalEccErrors", d, _CORRECTED, _AGGREGATE),
        ecc_aggregate_uncorrected=r.integer("nvmlDeviceGetTotalEccErrors", d, _UNCORRECTED, _AGGREGATE),
        retired_pages_sbe=len(retired[0]) if isinstance(retired[0], list) else None,
        retired_pages_dbe=len(retired[1]) if isinstance(retired[1], list) else None,
        retired_pages_pending=_as_bool(r.get("nvmlDeviceGetRetiredPagesPendingStatus", d)),
        remapped_rows_corrected=_as_int(remap[0]) if _quad(remap) else None,
        remapped_rows_uncorrected=_as_int(remap[1]) if _quad(remap) else None,
        remap_pending=_as_bool(remap[2]) if _quad(remap) else None,
        remap_failed=_as_bool(remap[3]) if _quad(remap) else None,
        pcie_gen=r.integer("nvmlDeviceGetCurrPcieLinkGeneration", d),
        pcie_gen_max=r.integer("nvmlDeviceGetMaxPcieLinkGeneration", d),
        pcie_gen_gpu_max=r.integer("nvmlDeviceGetGpuMaxPcieLinkGeneration", d),
        pcie_width=r.integer("nvmlDeviceGetCurrPcieLinkWidth", d),
        pcie_width_max=r.integer("nvmlDeviceGetMaxPcieLinkWidth", d),
        pcie_replay_count=r.integer("nvmlDeviceGetPcieReplayCounter", d),
    )
    return row


def _read_nvlinks(r: _Reader, d: int) -> list[dict[str, Any]]:
    """gpu_health_nvlink rows: every NVLink the device has, up or down, with its error counters."""
    rows = []
    for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
        try:
            state = r.backend.call("nvmlDeviceGetNvLinkState", d, link)
        except NvmlError as exc:
            if exc.kind in _NO_SUCH_LINK:
                break
            state = None
        remote = _as_str(_field(r.get("nvmlDeviceGetNvLinkRemotePciInfo", d, link), "busId"))
        version = r.integer("nvmlDeviceGetNvLinkVersion", d, link)
        row = {"device": d, "link": link, "active": _as_bool(state),
               "version": None if version is None else _NVLINK_VERSIONS.get(version),
               "remote_pci_bus_id": None if remote is None or remote.upper().startswith("FFFFFFFF") else remote}
        row.update({name: r.integer("nvmlDeviceGetNvLinkErrorCounter", d, link, counter)
                    for name, counter in _NVLINK_COUNTERS.items()})
        rows.append(row)
    return rows


@dataclass
class DeviceInfo:
    """What a telemetry sample repeats on every row and is read once: identity and maxima."""

    device: int
    uuid: str | None
    pci_bus_id: str | None
    sm_clock_max_mhz: int | None
    power_default_limit_w: float | None
    pcie_gen_max: int | None
    pcie_width_max: int | None


def read_devices(backend: Backend) -> list[DeviceInfo]:
    """Identity and maxima of every GPU, read once before sampling telemetry."""
    r = _Reader(backend)
    return [DeviceInfo(device=d, uuid=_as_str(r.get("nvmlDeviceGetUUID", d)),
                       pci_bus_id=_as_str(_field(r.get("nvmlDeviceGetPciInfo", d), "busId")),
                       sm_clock_max_mhz=r.integer("nvmlDeviceGetMaxClockInfo", d, _CLOCK_SM),
                       power_default_limit_w=r.number("nvmlDeviceGetPowerManagementDefaultLimit", d, scale=1e-3),
                       pcie_gen_max=r.integer("nvmlDeviceGetMaxPcieLinkGeneration", d),
                       pcie_width_max=r.integer("nvmlDeviceGetMaxPcieLinkWidth", d))
            for d in range(start(backend))]


def read_sample(backend: Backend, info: DeviceInfo, clock: Callable[[], int] = time.time_ns) -> dict[str, Any]:
    """One gpu_telemetry row for a device: clocks, utilization, memory, power, temperature, throttle reasons."""
    r = _Reader(backend)
    d = info.device
    ts_ns = clock()
    util = r.get("nvmlDeviceGetUtilizationRates", d)
    return {
        "ts_ns": ts_ns, "device": d, "uuid": info.uuid, "pci_bus_id": info.pci_bus_id,
        "sm_clock_mhz": r.integer("nvmlDeviceGetClockInfo", d, _CLOCK_SM),
        "sm_clock_max_mhz": info.sm_clock_max_mhz,
        "mem_clock_mhz": r.integer("nvmlDeviceGetClockInfo", d, _CLOCK_MEM),
        "gpu_util_pct": _as_int(_field(util, "gpu")),
        "mem_util_pct": _as_int(_field(util, "memory")),
        "memory_used_bytes": _as_int(_field(r.get("nvmlDeviceGetMemoryInfo", d), "used")),
        "power_w": r.number("nvmlDeviceGetPowerUsage", d, scale=1e-3),
        "power_limit_w": r.number("nvmlDeviceGetEnforcedPowerLimit", d, scale=1e-3),
        "power_default_limit_w": info.power_default_limit_w,
        "temperature_c": r.integer("nvmlDeviceGetTemperature", d, pynvml.NVML_TEMPERATURE_GPU),
        "clocks_event_reasons": _reasons(r, d),
        "pstate": r.integer("nvmlDeviceGetPerformanceState", d),
        "pcie_gen": r.integer("nvmlDeviceGetCurrPcieLinkGeneration", d),
        "pcie_gen_max": info.pcie_gen_max,
        "pcie_width": r.integer("nvmlDeviceGetCurrPcieLinkWidth", d),
        "pcie_width_max": info.pcie_width_max,
    }


def _reasons(r: _Reader, d: int) -> int | None:
    """The active clocks-event (throttle) reasons bitmask; older drivers only know the 'throttle' name."""
    value = r.integer("nvmlDeviceGetCurrentClocksEventReasons", d)
    return value if value is not None else r.integer("nvmlDeviceGetCurrentClocksThrottleReasons", d)


def _memory_temperature(r: _Reader, d: int) -> int | None:
    """HBM temperature (°C) from NVML's field values, where the device reports it."""
    values = r.get("nvmlDeviceGetFieldValues", d, [pynvml.NVML_FI_DEV_MEMORY_TEMP])
    if not isinstance(values, list) or len(values) != 1 or not isinstance(values[0], dict):
        return None
    fv = values[0]
    if fv.get("nvmlReturn") != 0 or not isinstance(fv.get("value"), dict):
        return None
    value_type = fv.get("valueType")
    member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(
        value_type) if isinstance(value_type, int) else None
    return _as_int(fv["value"].get(member)) if member else None


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_int(value: Any, scale: float = 1) -> int | None:
    """An integer answer (scaled), or None for anything else: recorded answers are untrusted."""
    if not _is_number(value):
        return None
    scaled = value * scale
    return int(scaled) if abs(scaled) < 2**63 else None


def _as_bool(value: Any) -> bool | None:
    return bool(value) if _is_number(value) else None


def _as_str(value: Any) -> str | None:
    return value[:256] if isinstance(value, str) else None


def _pair(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(_is_number(v) for v in value)


def _quad(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 4 and all(_is_number(v) for v in value)

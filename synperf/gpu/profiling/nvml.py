"""GPU identity and device state through NVML (nvidia-ml-py, import name ``pynvml``).

* Identity: the torch device the profiler runs on is mapped to its NVML handle by **UUID**,
  never by index: NVML enumerates GPUs in PCI bus order and ignores ``CUDA_VISIBLE_DEVICES``,
  while CUDA's order follows ``CUDA_DEVICE_ORDER`` (default: fastest first) and the visible-device
  mask (gpuopenanalytics/pynvml#28). The NVML device name is then looked up in the registry's
  ``device_names`` (:meth:`synperf.data.hardware.Registry.id_for_device_name`).
* State: SM and memory clocks (MHz), GPU temperature (°C), power draw and enforced limit (W; NVML
  reports mW), performance state, and the clock-event reasons bitmask (why the clocks are below
  their maximum: power cap, thermal slowdown, ...), sampled before and after each timed point.

Only :func:`load_pynvml` and :func:`torch_device_uuid` touch the outside world, so tests pass a
fake NVML module. Running ``python -m synperf.gpu.profiling.nvml`` prints the local GPU's registry id
as JSON (the Snakemake rules call it to name the output folder) or exits non-zero with a message.

Source of the API and constants: NVML API reference (https://docs.nvidia.com/deploy/nvml-api/),
groups "Device Queries", "ClocksEventReasons" and "System Queries".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from synperf.gpu.profiling import NoGPUError, ProfilingError, no_gpu_message, parse_capability

#: clock-event reason bits (``nvmlClocksEventReason*``; formerly ``nvmlClocksThrottleReason*``)
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}

#: reasons that mean the SM clock was pulled down during a measurement (power or heat)
THROTTLE_REASONS = frozenset({"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                              "hw_power_brake_slowdown"})

# NVML enum values (nvmlClockType_t, nvmlTemperatureSensors_t), used when the module lacks the names
_NVML_CLOCK_SM = 1
_NVML_CLOCK_MEM = 2
_NVML_TEMPERATURE_GPU = 0


def decode_clock_event_reasons(mask: int | None) -> list[str]:
    """Names of the bits set in an NVML clock-event reasons mask; unknown bits as ``unknown_0x..``.

    ``None`` (NVML could not say) decodes to ``[]``.
    """
    if mask is None:
        return []
    mask = int(mask)
    names = [name for bit, name in sorted(CLOCK_EVENT_REASONS.items()) if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    bit = 1
    while unknown:
        if unknown & bit:
            names.append(f"unknown_{bit:#x}")
            unknown &= ~bit
        bit <<= 1
    return names


def is_throttled(mask: int | None) -> bool:
    """True when the mask has a power or thermal slowdown bit set (:data:`THROTTLE_REASONS`)."""
    return bool(set(decode_clock_event_reasons(mask)) & THROTTLE_REASONS)


def clock_drop(before_mhz: float | None, after_mhz: float | None) -> float | None:
    """Relative SM-clock drop across a measurement, ``(before - after) / before`` (None if unknown).

    aiconfigurator's collector flags a case when this exceeds 10 %.
    """
    if not before_mhz or after_mhz is None:
        return None
    return (float(before_mhz) - float(after_mhz)) / float(before_mhz)


def uuid_hex(uuid: Any) -> str:
    """The 32 hex digits of a GPU UUID, lower case, whatever its spelling.

    NVML spells it ``GPU-8f0e3c9a-...``; torch's ``get_device_properties().uuid`` prints without the
    prefix. MIG instances (``MIG-...``) keep their own UUIDs.

    Raises:
        ValueError: the text holds no 32-digit UUID.
    """
    text = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
    text = re.sub(r"^(GPU|MIG)-", "", text.strip(), flags=re.IGNORECASE)
    digits = re.sub(r"[^0-9a-fA-F]", "", text).lower()
    if len(digits) != 32:
        raise ValueError(f"not a GPU UUID: {uuid!r}")
    return digits


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlUnavailable(ProfilingError):
    """nvidia-ml-py is not installed, or NVML cannot initialise (no driver)."""


def load_pynvml():
    """Import and initialise NVML (nvidia-ml-py). Raises :class:`NvmlUnavailable` with the reason."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError as exc:
        raise NvmlUnavailable(f"nvidia-ml-py is not installed ({exc}); pip install nvidia-ml-py") from exc
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # pynvml.NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        raise NvmlUnavailable(f"NVML cannot start ({type(exc).__name__}: {exc})") from exc
    return pynvml


class Nvml:
    """Thin reader over an initialised NVML module (``pynvml`` or a fake with the same functions).

    Every query that NVML does not support on a device (``NVMLError_NotSupported``), or that the
    module lacks, reads as ``None`` instead of failing the measurement.
    """

    def __init__(self, module):
        self.m = module

    def _call(self, name: str, *args):
        fn = getattr(self.m, name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except Exception:  # NVMLError subclasses: NotSupported, NoPermission, GpuIsLost, ...
            return None

    def _const(self, name: str, default: int) -> int:
        return getattr(self.m, name, default)

    # identity -----------------------------------------------------------------------------
    def devices(self) -> list[dict[str, Any]]:
        """Every GPU NVML sees, in NVML (PCI) order: ``index``, ``uuid``, ``name``."""
        out = []
        for i in range(int(self._call("nvmlDeviceGetCount") or 0)):
            h = self._call("nvmlDeviceGetHandleByIndex", i)
            if h is None:
                continue
            out.append({"index": i, "uuid": _text(self._call("nvmlDeviceGetUUID", h)),
                        "name": _text(self._call("nvmlDeviceGetName", h)), "handle": h})
        return out

    def handle_for_uuid(self, uuid: str):
        """The NVML handle of the GPU with this UUID (any spelling, see :func:`uuid_hex`).

        Raises:
            ProfilingError: no NVML device has this UUID.
        """
        want = uuid_hex(uuid)
        h = self._call("nvmlDeviceGetHandleByUUID", f"GPU-{want[:8]}-{want[8:12]}-{want[12:16]}-"
                                                    f"{want[16:20]}-{want[20:]}")
        if h is not None:
            got = self._call("nvmlDeviceGetUUID", h)
            if got is not None and uuid_hex(_text(got)) == want:
                return h
        for dev in self.devices():  # spelling differences (MIG, old drivers): scan and compare digits
            try:
                if uuid_hex(dev["uuid"]) == want:
                    return dev["handle"]
            except ValueError:
                continue
        seen = ", ".join(f"{d['name']} {d['uuid']}" for d in self.devices()) or "none"
        raise ProfilingError(f"NVML has no GPU with UUID {uuid} (NVML sees: {seen})")

    def identity(self, handle) -> dict[str, Any]:
        """Static facts of one GPU: name, UUID, PCI bus id, driver and CUDA driver versions, compute
        capability, memory size (bytes), maximum SM/memory clocks (MHz), enforced power limit (W),
        persistence mode."""
        cc = self._call("nvmlDeviceGetCudaComputeCapability", handle)
        cuda_drv = self._call("nvmlSystemGetCudaDriverVersion")
        mem = self._call("nvmlDeviceGetMemoryInfo", handle)
        pci = self._call("nvmlDeviceGetPciInfo", handle)
        limit_mw = self._call("nvmlDeviceGetEnforcedPowerLimit", handle)
        return {
            "name": _opt_text(self._call("nvmlDeviceGetName", handle)),
            "uuid": _opt_text(self._call("nvmlDeviceGetUUID", handle)),
            "pci_bus_id": _opt_text(getattr(pci, "busId", None)) if pci is not None else None,
            "driver_version": _opt_text(self._call("nvmlSystemGetDriverVersion")),
            "cuda_driver_version": (f"{int(cuda_drv) // 1000}.{int(cuda_drv) % 1000 // 10}"
                                    if cuda_drv is not None else None),
            "compute_capability": f"{cc[0]}.{cc[1]}" if cc is not None else None,
            "memory_total_bytes": int(mem.total) if mem is not None else None,
            "max_sm_clock_mhz": self._call("nvmlDeviceGetMaxClockInfo", handle,
                                           self._const("NVML_CLOCK_SM", _NVML_CLOCK_SM)),
            "max_mem_clock_mhz": self._call("nvmlDeviceGetMaxClockInfo", handle,
                                            self._const("NVML_CLOCK_MEM", _NVML_CLOCK_MEM)),
            "power_limit_w": limit_mw / 1000.0 if limit_mw is not None else None,
            "persistence_mode": self._call("nvmlDeviceGetPersistenceMode", handle),
        }

    # state --------------------------------------------------------------------------------
    def clock_event_reasons(self, handle) -> int | None:
        """Current clock-event reasons mask (``nvmlDeviceGetCurrentClocksEventReasons``; the older
        ``...ClocksThrottleReasons`` on nvidia-ml-py versions before the rename)."""
        mask = self._call("nvmlDeviceGetCurrentClocksEventReasons", handle)
        if mask is None:
            mask = self._call("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        return int(mask) if mask is not None else None

    def snapshot(self, handle) -> dict[str, Any]:
        """Device state now: ``sm_clock_mhz``, ``mem_clock_mhz``, ``temperature_c``, ``power_w``,
        ``pstate``, ``clock_event_reasons`` (mask) and ``clock_event_reason_names``."""
        power_mw = self._call("nvmlDeviceGetPowerUsage", handle)
        mask = self.clock_event_reasons(handle)
        return {
            "sm_clock_mhz": self._call("nvmlDeviceGetClockInfo", handle, self._const("NVML_CLOCK_SM", _NVML_CLOCK_SM)),
            "mem_clock_mhz": self._call("nvmlDeviceGetClockInfo", handle,
                                        self._const("NVML_CLOCK_MEM", _NVML_CLOCK_MEM)),
            "temperature_c": self._call("nvmlDeviceGetTemperature", handle,
                                        self._const("NVML_TEMPERATURE_GPU", _NVML_TEMPERATURE_GPU)),
            "power_w": power_mw / 1000.0 if power_mw is not None else None,
            "pstate": self._call("nvmlDeviceGetPerformanceState", handle),
            "clock_event_reasons": mask,
            "clock_event_reason_names": decode_clock_event_reasons(mask),
        }


def _opt_text(value: Any) -> str | None:
    return None if value is None else _text(value)


# ------------------------------------------------------------------------------------------------
# torch side and resolution to a registry id
# ------------------------------------------------------------------------------------------------

def require_cuda():
    """Import torch and check that a CUDA device is visible; return the torch module.

    Raises:
        NoGPUError: with :func:`synperf.gpu.profiling.no_gpu_message` and the reason (CPU build of torch,
            no driver, empty ``CUDA_VISIBLE_DEVICES``).
    """
    import torch

    if torch.version.cuda is None:
        raise NoGPUError(no_gpu_message(f"torch {torch.__version__} is a CPU-only build"))
    if not torch.cuda.is_available():
        cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
        detail = "torch.cuda.is_available() is False"
        if cvd is not None:
            detail += f", CUDA_VISIBLE_DEVICES={cvd!r}"
        raise NoGPUError(no_gpu_message(detail))
    return torch


def torch_device_uuid(index: int = 0) -> str:
    """UUID of torch's CUDA device ``index`` (after ``CUDA_VISIBLE_DEVICES``), as 32 hex digits."""
    torch = require_cuda()
    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    if uuid is None:
        raise ProfilingError(f"torch {torch.__version__} does not report device UUIDs; need torch >= 2.0")
    return uuid_hex(str(uuid))


def unknown_gpu_message(name: str, uuid: str, registry_path: Any) -> str:
    """The error text for a GPU no registry entry lists (a MIG slice gets its own advice)."""
    from synperf.data.hardware import MIG_ADVICE, is_mig_slice

    if is_mig_slice(name):
        return f"GPU {name!r} (UUID {uuid}) is a MIG slice: " + MIG_ADVICE.format(path=registry_path)
    return (f"unknown GPU {name!r} (UUID {uuid}): no GPU in {registry_path} lists it under `device_names`. "
            f"Add an entry for it to {registry_path} with device_names: [{name!r}] and its sourced specs "
            "(docs/data.md, 'Adding a GPU'), or add the name to the entry of the same model, then rerun.")


@dataclass
class GPUIdentity:
    """The GPU a profiling job runs on.

    Attributes:
        gpu_id: registry id (``config/gpus.yaml``), the ``<gpu>`` of the output path.
        name: NVML device name (torch's when NVML is unavailable).
        uuid: NVML UUID (``GPU-...``).
        torch_index: torch CUDA device index.
        handle: NVML handle, or None without NVML.
        nvml: the :class:`Nvml` reader, or None.
        note: how the identity was established when NVML was not used.
    """

    gpu_id: str
    name: str
    uuid: str
    torch_index: int = 0
    handle: Any = None
    nvml: Nvml | None = None
    note: str = ""
    identity: dict[str, Any] = field(default_factory=dict)

    def snapshot(self) -> dict[str, Any]:
        """NVML state now (empty without NVML)."""
        return self.nvml.snapshot(self.handle) if self.nvml is not None else {}


def resolve_gpu(registry, uuid: str, *, nvml: Nvml | None, fallback_name: str | None = None,
                torch_index: int = 0, allow_unknown: bool = False) -> GPUIdentity:
    """Registry id of the GPU with this UUID, from the name NVML reports for that UUID.

    Args:
        registry: :class:`synperf.data.hardware.Registry`.
        uuid: the torch device's UUID (any spelling).
        nvml: NVML reader, or None when NVML is unavailable: then ``fallback_name`` (torch's device
            name) is used and the identity's ``note`` says so.
        allow_unknown: return a slug of the name instead of failing for a GPU missing from the registry
            (the device smoke script only).

    Raises:
        ProfilingError: the GPU is not in the registry (the message says how to add it), or NVML has
            no device with this UUID.
    """
    note = ""
    identity: dict[str, Any] = {}
    handle = None
    if nvml is not None:
        handle = nvml.handle_for_uuid(uuid)
        identity = nvml.identity(handle)
        name = identity.get("name") or fallback_name or ""
        uuid_text = identity.get("uuid") or uuid
    else:
        if not fallback_name:
            raise ProfilingError("NVML is unavailable and no device name was given")
        name, uuid_text = fallback_name, f"GPU-{uuid}"
        note = "NVML unavailable: identity from torch's device name and UUID; no clocks or power recorded"
    try:
        gid = registry.id_for_device_name(name, "profiling")
    except Exception:
        if not allow_unknown:
            raise ProfilingError(unknown_gpu_message(name, uuid_text, registry.path)) from None
        gid = "unknown_" + re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
        note = (note + "; " if note else "") + f"not in the registry: id {gid!r} is a slug of the name"
    return GPUIdentity(gpu_id=gid, name=name, uuid=uuid_text, torch_index=torch_index, handle=handle, nvml=nvml,
                       note=note, identity=identity)


def local_gpu(registry, torch_index: int = 0, allow_unknown: bool = False) -> GPUIdentity:
    """The registry identity of torch's CUDA device ``torch_index`` on this machine (see :func:`resolve_gpu`).

    Raises:
        NoGPUError: no CUDA device visible.
        ProfilingError: unknown GPU.
    """
    torch = require_cuda()
    uuid = torch_device_uuid(torch_index)
    try:
        nvml = Nvml(load_pynvml())
    except NvmlUnavailable as exc:
        print(f"warning: {exc}; device clocks, power and throttle reasons will not be recorded", file=sys.stderr)
        nvml = None
    return resolve_gpu(registry, uuid, nvml=nvml, fallback_name=torch.cuda.get_device_name(torch_index),
                       torch_index=torch_index, allow_unknown=allow_unknown)


def main(argv: list[str] | None = None) -> int:
    """``python -m synperf.gpu.profiling.nvml [--registry config/gpus.yaml]``: print the local GPU as JSON
    (``gpu``, ``name``, ``uuid``, ``compute_capability``); exit 3 with the message on stderr when there is
    no GPU or it is unknown."""
    from synperf.data.hardware import load_registry

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--registry", default="config/gpus.yaml", help="GPU registry (default: %(default)s)")
    ap.add_argument("--device", type=int, default=0, help="torch CUDA device index (after CUDA_VISIBLE_DEVICES)")
    args = ap.parse_args(argv)
    try:
        registry = load_registry(args.registry)
        ident = local_gpu(registry, args.device)
    except ProfilingError as exc:
        print(str(exc), file=sys.stderr)
        return 3
    spec = registry[ident.gpu_id]
    print(json.dumps({"gpu": ident.gpu_id, "name": ident.name, "uuid": ident.uuid,
                      "compute_capability": list(parse_capability(spec.compute_capability))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

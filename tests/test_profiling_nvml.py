"""NVML provenance and GPU-id detection by UUID, against a fake NVML module (the edge only)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from synperf.gpu.profiling import ProfilingError
from synperf.gpu.profiling.nvml import Nvml, clock_drop, decode_clock_event_reasons, is_throttled, resolve_gpu, uuid_hex

REPO = Path(__file__).resolve().parent.parent

H100_UUID = "GPU-8f0e3c9a-1b2c-4d5e-8f90-0123456789ab"
A100_UUID = "GPU-11111111-2222-3333-4444-555555555555"


class NVMLError(Exception):
    pass


class FakeNVML:
    """The pynvml functions the profiler calls, over a list of fake devices (PCI order)."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, devices, new_names=True):
        self.devs = devices
        if not new_names:  # nvidia-ml-py before the ClocksThrottle -> ClocksEvent rename
            self.nvmlDeviceGetCurrentClocksThrottleReasons = self.nvmlDeviceGetCurrentClocksEventReasons
            self.nvmlDeviceGetCurrentClocksEventReasons = None

    def nvmlDeviceGetCount(self):
        return len(self.devs)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.devs[i]

    def nvmlDeviceGetHandleByUUID(self, uuid):
        for d in self.devs:
            if d["uuid"] == uuid:
                return d
        raise NVMLError("NVML_ERROR_NOT_FOUND")

    def nvmlDeviceGetUUID(self, h):
        return h["uuid"]

    def nvmlDeviceGetName(self, h):
        return h["name"].encode()   # old pynvml returns bytes

    def nvmlSystemGetDriverVersion(self):
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12040

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return h["cc"]

    def nvmlDeviceGetClockInfo(self, h, kind):
        return h["sm"] if kind == self.NVML_CLOCK_SM else h["mem"]

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return 1980 if kind == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 41

    def nvmlDeviceGetPowerUsage(self, h):
        return 123_456          # mW

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700_000          # mW

    def nvmlDeviceGetPerformanceState(self, h):
        raise NVMLError("NVML_ERROR_NOT_SUPPORTED")

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return h["reasons"]


def devices():
    # NVML (PCI) order puts the A100 first; torch's device 0 is the H100: only the UUID says which is which
    return [
        {"uuid": A100_UUID, "name": "NVIDIA A100-SXM4-80GB", "cc": (8, 0), "sm": 1410, "mem": 1593, "reasons": 0x1},
        {"uuid": H100_UUID, "name": "NVIDIA H100 80GB HBM3", "cc": (9, 0), "sm": 1755, "mem": 2619,
         "reasons": 0x4 | 0x20},
    ]


def test_decode_clock_event_reasons():
    assert decode_clock_event_reasons(0) == []
    assert decode_clock_event_reasons(None) == []
    assert decode_clock_event_reasons(0x1) == ["gpu_idle"]
    assert decode_clock_event_reasons(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert decode_clock_event_reasons(0x1000) == ["unknown_0x1000"]
    assert is_throttled(0x4) and is_throttled(0x80)
    assert not is_throttled(0x1) and not is_throttled(0x10) and not is_throttled(None)
    assert clock_drop(1980, 1782) == pytest.approx(0.1)
    assert clock_drop(None, 1000) is None


def test_uuid_spellings_compare_equal():
    torch_style = "8f0e3c9a-1b2c-4d5e-8f90-0123456789ab"   # torch's get_device_properties().uuid
    assert uuid_hex(H100_UUID) == uuid_hex(torch_style) == uuid_hex(H100_UUID.lower().encode())
    with pytest.raises(ValueError):
        uuid_hex("GPU-1234")


def test_snapshot_units_and_unsupported_fields():
    nv = Nvml(FakeNVML(devices()))
    snap = nv.snapshot(devices()[1])
    assert snap["sm_clock_mhz"] == 1755 and snap["mem_clock_mhz"] == 2619
    assert snap["power_w"] == pytest.approx(123.456)
    assert snap["temperature_c"] == 41
    assert snap["pstate"] is None                     # NotSupported reads as None, not as a failure
    assert snap["clock_event_reasons"] == 0x24
    assert snap["clock_event_reason_names"] == ["sw_power_cap", "sw_thermal_slowdown"]
    ident = nv.identity(devices()[1])
    assert ident["name"] == "NVIDIA H100 80GB HBM3"
    assert ident["cuda_driver_version"] == "12.4" and ident["driver_version"] == "550.54.15"
    assert ident["compute_capability"] == "9.0" and ident["power_limit_w"] == 700.0


def test_old_nvml_throttle_reason_name_still_read():
    nv = Nvml(FakeNVML(devices(), new_names=False))
    assert nv.snapshot(devices()[1])["clock_event_reasons"] == 0x24


def test_gpu_id_from_uuid_not_index(registry):
    nv = Nvml(FakeNVML(devices()))
    ident = resolve_gpu(registry, "8f0e3c9a-1b2c-4d5e-8f90-0123456789ab", nvml=nv)
    assert ident.gpu_id == "h100_sxm"
    assert ident.uuid == H100_UUID
    assert ident.snapshot()["sm_clock_mhz"] == 1755
    other = resolve_gpu(registry, A100_UUID, nvml=nv)
    assert other.gpu_id == "a100_sxm4_80gb"


def test_unknown_gpu_says_how_to_add_it(registry):
    devs = [{"uuid": H100_UUID, "name": "NVIDIA Imaginary 9000", "cc": (12, 0), "sm": 1, "mem": 1, "reasons": 0}]
    nv = Nvml(FakeNVML(devs))
    with pytest.raises(ProfilingError) as err:
        resolve_gpu(registry, H100_UUID, nvml=nv)
    msg = str(err.value)
    assert "NVIDIA Imaginary 9000" in msg and "device_names" in msg and "Adding a GPU" in msg
    slug = resolve_gpu(registry, H100_UUID, nvml=nv, allow_unknown=True)
    assert slug.gpu_id == "unknown_nvidia_imaginary_9000" and "slug" in slug.note


def test_uuid_missing_from_nvml_is_an_error(registry):
    nv = Nvml(FakeNVML(devices()))
    with pytest.raises(ProfilingError, match="no GPU with UUID"):
        resolve_gpu(registry, "GPU-99999999-2222-3333-4444-555555555555", nvml=nv)


def test_without_nvml_the_torch_name_is_used_and_noted(registry):
    ident = resolve_gpu(registry, H100_UUID, nvml=None, fallback_name="NVIDIA H100 80GB HBM3")
    assert ident.gpu_id == "h100_sxm" and "NVML unavailable" in ident.note
    assert ident.snapshot() == {}


def test_detect_cli_without_gpu_exits_with_the_message():
    proc = subprocess.run([sys.executable, "-m", "synperf.gpu.profiling.nvml"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if has_gpu:
        assert proc.returncode == 0 and "gpu" in json.loads(proc.stdout)
    else:
        assert proc.returncode == 3
        assert "no NVIDIA GPU visible" in proc.stderr and "profiling needs one" in proc.stderr

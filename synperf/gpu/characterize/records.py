"""The ``data/hardware/<gpu>.json`` document: one record per benchmark from its timings (pure), validated, written."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any, Mapping

from synperf.data.hardware import MEASURED_FIELDS, validate_measured_document
from synperf.data.io import write_json
from synperf.gpu.characterize import arithmetic as ar
from synperf.gpu.characterize.benchmarks import BenchmarkInfo, CharacterizeSettings, Prepared
from synperf.gpu.profiling.timing import TimingResult


def registry_field(key: str) -> str | None:
    """The registry field a measurement key replaces (None for informational ones)."""
    return MEASURED_FIELDS[key][0] if key in MEASURED_FIELDS else None


def datasheet_reference(spec, key: str) -> float | None:
    """The datasheet value a measurement is compared with: its registry field's, and ``fp32_tflops`` for
    the informational SGEMM; None without a registry entry (unknown GPU) or a datasheet value."""
    if spec is None:
        return None
    field_name = registry_field(key) or ("fp32_tflops" if key == "gemm_fp32" else None)
    if field_name is None:
        return None
    value = spec.datasheet_value(field_name)
    return None if value is None else float(value)


def build_record(info: BenchmarkInfo, prepared: Prepared, timing: TimingResult, clocks: Mapping[str, Any],
                 sm_count: int, datasheet: float | None = None, extra: Mapping[str, Any] | None = None) -> dict:
    """One measurement of the output file from a benchmark's work, its timings and the observed clocks.

    ``value``: bytes or FLOP per launch over the best per-launch time, in GB/s or TFLOP/s; for ``smem_bw``
    the median over SMs of bytes per SM clock (``extra["smem"]``, from ``clock64``). ``per_clk_per_sm``: the
    GPU-wide rate per second divided by ``sm_count x`` the median observed SM clock (B or FLOP per clock per
    SM; for ``smem_bw`` the event-timed cross-check of ``value``). ``timing``: ``best_s``, ``median_s``,
    ``p90_s`` (seconds per launch), ``n_samples``, ``calls_per_sample``, ``warmup_calls``, ``estimate_s``.

    Raises:
        ValueError: no samples or a sample that is not finite and > 0; ``smem_bw`` without ``extra["smem"]``.
    """
    times = ar.per_call_seconds(timing.stats())
    extra = dict(extra or {})
    work_unit = "B" if info.unit in ("GB/s", "B/clk/SM") else "FLOP"
    best_rate_per_s = prepared.work_per_call / times["best_s"]
    sm_clock = clocks.get("sm_clock_mhz")
    timing_out = {**times, "calls_per_sample": timing.calls_per_sample, "warmup_calls": timing.warmup_iters,
                  "estimate_s": timing.estimate_us * 1e-6}
    if info.unit == "B/clk/SM":
        smem = extra.pop("smem", None)
        if smem is None:
            raise ValueError("smem_bw needs the clock64 figures of smem_read (extra['smem'])")
        value = float(smem["value"])
        timing_out["gbps_best"] = ar.gbps(prepared.work_per_call, times["best_s"])
        extra["smem_per_sm"] = smem
    else:
        rates = ar.rate_record(prepared.work_per_call, times, info.unit)
        value = rates["value"]
        timing_out["value_median"] = rates["value_median"]
    rec = {
        "value": value,
        "unit": info.unit,
        "statistic": "best",
        "method": info.method,
        "method_detail": info.detail,
        "reference": info.reference,
        "implementation": prepared.implementation,
        "registry_field": registry_field(info.key),
        "work": {**prepared.work, "per_call": prepared.work_per_call, "unit": work_unit},
        "timing": timing_out,
        "clocks": dict(clocks),
        "per_clk_per_sm": ar.per_clk_per_sm(best_rate_per_s, sm_count, sm_clock),
        "datasheet_value": datasheet,
        "ratio_to_datasheet": ar.ratio(value, datasheet),
    }
    rec.update(extra)
    return rec



def build_document(gpu: str, measurements: Mapping[str, dict], skipped: Mapping[str, str], *,
                   device_name: str = "", uuid: str | None = None, created_utc: str | None = None,
                   compute_capability: str | None = None, sm_count: int | None = None,
                   l2_bytes: int | None = None, environment: Mapping[str, Any] | None = None,
                   settings: CharacterizeSettings | None = None, seconds: float | None = None,
                   identity_note: str = "") -> dict:
    """The ``data/hardware/<gpu>.json`` document (``workflow/schemas/hardware.schema.yaml``)."""
    doc: dict[str, Any] = {
        "version": 1,
        "gpu": gpu,
        "device_name": device_name,
        "uuid": uuid,
        "created_utc": created_utc or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "measurements": dict(measurements),
        "skipped": dict(skipped),
    }
    optional = {"compute_capability": compute_capability, "sm_count": sm_count, "l2_bytes": l2_bytes,
                "environment": dict(environment) if environment is not None else None,
                "settings": settings.as_dict() if settings is not None else None,
                "seconds": round(seconds, 2) if seconds is not None else None,
                "identity_note": identity_note or None}
    doc.update({k: v for k, v in optional.items() if v is not None})
    return doc


def write_document(doc: Mapping[str, Any], out_dir: str | Path) -> Path:
    """Validate ``doc`` against the schema and write it atomically to ``<out_dir>/<gpu>.json``.

    Raises:
        InputError: the document fails the schema (never written then).
    """
    path = Path(out_dir) / f"{doc.get('gpu')}.json"
    validate_measured_document(doc, path)
    write_json(doc, path)
    return path

"""Pipeline configuration checks beyond the JSON schema (cross-references to the GPU registry), and checks of the
GPU registry file (``config/gpus.yaml``) beyond its schema: a key listed twice in one mapping (YAML keeps the last
silently), non-finite numbers, numbers outside the range a GPU can have in the field's unit (a DRAM bandwidth
in TB/s where GB/s is meant, a clock in GHz where MHz is meant), an unknown memory type, and a dense Tensor Core
peak whose rate per SM per clock differs from the other GPUs of its compute capability (a sparse or
FP16-accumulate figure) without a sourced ``tensor_fp32_accumulate_rate``.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import yaml

from synperf.data.io import InputError

#: config keys holding a data source's GPU names -> registry ids (the only place such maps live)
GPU_MAP_KEYS = (("ingest", "vidur", "gpu_map"), ("ingest", "pipeweave", "moe_gpu_map"), ("e2e", "real_gpu_map"),
                ("e2e", "collective_gpu_map"))


def gpu_name_map(value: Any, key: str, what: str) -> dict[str, str]:
    """A GPU name map from the config: ``value`` (the config's ``key``) as ``{name: registry id}``.

    Args:
        value: the config value (a mapping, or None when the key is missing).
        key: the dotted config key, named in the error (e.g. ``ingest.vidur.gpu_map``).
        what: whose names it maps (e.g. ``Vidur's GPU folder``), named in the error.

    Raises:
        InputError: ``value`` is missing, empty or not a mapping.
    """
    if not isinstance(value, Mapping) or not value:
        raise InputError(f"config key {key}: missing or empty; expected a mapping of {what} names to registry ids "
                         f"(config/config.yaml has one), got {value!r}")
    return {str(name): str(gid) for name, gid in value.items()}


def check_references(config: dict, registry) -> None:
    """Check that every GPU id the config names exists in the registry.

    Raises:
        InputError: naming the config key (e.g. ``experiments.gemm.unseen``) and the unknown id.
    """
    ids = registry.ids

    def need(gpu: str, key: str) -> None:
        if gpu not in ids:
            raise InputError(
                f"config key {key}: unknown GPU id {gpu!r}; expected an id of {registry.path} "
                f"(e.g. {sorted(ids)[:5]}...)"
            )

    for name, exp in config.get("experiments", {}).items():
        for part in ("seen", "unseen"):
            for gpu in exp.get(part, []):
                need(gpu, f"experiments.{name}.{part}")
        both = set(exp.get("seen", [])) & set(exp.get("unseen", []))
        if both:
            raise InputError(f"config key experiments.{name}: GPU(s) {sorted(both)} are both seen and unseen")
        for source, gpus in (exp.get("source_gpus") or {}).items():
            key = f"experiments.{name}.source_gpus.{source}"
            if source not in (exp.get("sources") or []):
                raise InputError(f"config key {key}: source {source!r} is not in experiments.{name}.sources "
                                 f"{exp.get('sources') or []}; list it there or remove the entry")
            for gpu in gpus:
                need(gpu, key)
                if gpu not in exp.get("seen", []) and gpu not in exp.get("unseen", []):
                    raise InputError(f"config key {key}: {gpu!r} is neither seen nor unseen in experiments.{name}; "
                                     "its rows would select nothing")
    for key, names in (("ablation.experiments", config.get("ablation", {}).get("experiments", [])),
                       ("protocols.experiments", config.get("protocols", {}).get("experiments", [])),
                       ("protocols.configured_only", config.get("protocols", {}).get("configured_only", []))):
        for name in names:
            if name not in config.get("experiments", {}):
                raise InputError(f"config key {key}: {name!r} is not an experiment of `experiments`")
    if config.get("ablation", {}).get("groups") and config.get("feature_set") == "v1":
        raise InputError("config key ablation.groups: feature set v1 has no feature groups; use feature_set: v2 "
                         "or an empty ablation")
    for path in GPU_MAP_KEYS:
        block: Any = config
        for part in path:
            block = (block or {}).get(part) if isinstance(block, Mapping) else None
        for name, gpu in (block or {}).items():
            need(gpu, f"{'.'.join(path)}.{name}")


def check_data_dir(config: dict) -> None:
    """Stop early when ``public_data_dir`` names a folder that does not exist and no rule downloads into it.

    Raises:
        InputError: naming the key, the path and the two ways to fix it.
    """
    from pathlib import Path

    data_dir = config["public_data_dir"]
    download_dir = config.get("download_dir", "resources/public-data")
    if Path(data_dir).resolve() != Path(download_dir).resolve() and not Path(data_dir).is_dir():
        raise InputError(
            f"config key public_data_dir: {data_dir!r} is not a folder. Point it at a copy of the public data "
            f"(e.g. --config public_data_dir=../shared/public-data), or leave it at {download_dir!r} to download "
            "the pinned files"
        )


#: numeric registry field -> (lowest, highest plausible value, unit); the bounds hold every GPU from Pascal to
#: Blackwell (P4: 1,114 MHz, 192 GB/s, 5.5 TFLOP/s FP32, 2 MiB L2; GB300: 8,000 GB/s, 5,000 TFLOP/s FP8, 129 MiB L2)
#: with room to spare, and exclude the same number written in a unit 1000x larger or smaller
PLAUSIBLE: dict[str, tuple[float, float, str]] = {
    "boost_clock_mhz": (200, 5000, "MHz"),
    "base_clock_mhz": (200, 5000, "MHz"),
    "sm_count": (1, 1024, "SMs"),
    "memory_gb": (1, 4096, "GB"),
    "dram_bw_gbps": (50, 100_000, "GB/s"),
    "l2_bw_gbps": (50, 200_000, "GB/s"),
    "l2_cache_mb": (0.25, 2048, "MiB"),
    "smem_per_sm_kb": (8, 2048, "KiB"),
    "fp32_tflops": (0.5, 2000, "TFLOP/s"),
    "dense_fp16_tflops": (5, 100_000, "TFLOP/s"),
    "dense_bf16_tflops": (5, 100_000, "TFLOP/s"),
    "dense_fp8_tflops": (5, 100_000, "TFLOP/s"),
    "dense_tf32_tflops": (5, 100_000, "TFLOP/s"),
    "tdp_w": (10, 10_000, "W"),
}
#: unit -> (the unit 1000x larger, the unit 1000x smaller), for the hint of a value off by that factor
_NEIGHBOUR_UNITS = {"MHz": ("GHz", "kHz"), "GB": ("TB", "MB"), "GB/s": ("TB/s", "MB/s"), "MiB": ("GiB", "KiB"),
                    "KiB": ("MiB", "bytes"), "TFLOP/s": ("PFLOP/s", "GFLOP/s"), "W": ("kW", "mW")}


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that refuses a key listed twice in one mapping, naming both lines."""


def _construct_unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise InputError(f"{loader.name}: {key!r} is listed twice in one mapping (lines {seen[key]} and {line}); "
                             "keep one")
        seen[key] = line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def load_unique_yaml(path: Path) -> Any:
    """The YAML document of ``path``, refusing a key listed twice in one mapping.

    Raises:
        InputError: a duplicate key (names the key and both lines), or not YAML.
    """
    text = Path(path).read_text()
    loader = _UniqueKeyLoader(text)
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({exc})".replace("\n", " ")) from None
    finally:
        loader.dispose()


def check_gpu_numbers(gpus: dict, path: Path) -> None:
    """Refuse a non-finite number anywhere in a GPU's entry and a field of :data:`PLAUSIBLE` outside its range.

    Raises:
        InputError: ``"<path>: gpus.<id>.dram_bw_gbps = 3.35 GB/s is outside the plausible [50, 100000] GB/s
            (a value in TB/s?)"``, or ``"... = nan; expected a finite number"``.
    """
    for gid, entry in gpus.items():
        for key, value in _numbers(entry, f"gpus.{gid}"):
            if not math.isfinite(value):
                raise InputError(f"{path}: {key} = {value}; expected a finite number")
        for name, (lo, hi, unit) in PLAUSIBLE.items():
            value = entry.get(name)
            if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if not lo <= value <= hi:
                bigger, smaller = _NEIGHBOUR_UNITS.get(unit, (None, None))
                hint = ""
                if value < lo and bigger and lo <= value * 1000 <= hi:
                    hint = f" (a value in {bigger}?)"
                elif value > hi and smaller and lo <= value / 1000 <= hi:
                    hint = f" (a value in {smaller}?)"
                raise InputError(f"{path}: gpus.{gid}.{name} = {value:g} {unit} is outside the plausible "
                                 f"[{lo:g}, {hi:g}] {unit}{hint}")


def _numbers(obj: Any, where: str):
    """(key path, value) of every float or int (not bool) in ``obj``, nested mappings and lists included."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _numbers(v, f"{where}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _numbers(v, f"{where}[{i}]")
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield where, float(obj)


def check_memory_types(gpus: dict, path: Path, known: Mapping[str, str]) -> None:
    """Refuse a GPU whose ``memory_type`` is not one of ``known`` (memory type -> family,
    :data:`synperf.data.hardware.MEMORY_FAMILY`).

    Raises:
        InputError: ``"<path>: gpus.l40s.memory_type: 'HBM4' is not a known memory type; expected one of [...]"``.
    """
    for gid, entry in gpus.items():
        value = entry.get("memory_type")
        if value not in known:
            raise InputError(f"{path}: gpus.{gid}.memory_type: {value!r} is not a known memory type; expected one of "
                             f"{list(known)}")


#: ``tensor_fp32_accumulate_rate`` of a registry entry -> its dense FP32-accumulate Tensor Core rate as a fraction of
#: the full rate of its compute capability (absent: full)
TENSOR_RATE = {"full": 1.0, "half": 0.5, "quarter": 0.25}
#: the dense Tensor Core peaks whose rate per SM per clock :func:`tensor_rate_mismatches` compares
TENSOR_PEAKS = ("dense_fp16_tflops", "dense_bf16_tflops", "dense_fp8_tflops", "dense_tf32_tflops")


def tensor_rate_mismatches(specs: Mapping[str, Any]) -> list[str]:
    """GPUs whose dense Tensor Core peak per SM per clock is unlike the other GPUs of their compute capability.

    Per compute capability and peak (:data:`TENSOR_PEAKS`), the full rate is the one shared by most GPUs without a
    ``tensor_fp32_accumulate_rate`` (or with ``full``); a GPU's expected rate is that times its
    :data:`TENSOR_RATE` fraction. The rate is the power of two nearest ``peak / (SMs x boost clock)`` from the
    datasheet values, as :meth:`synperf.data.hardware.GPUSpec.tensor_ops_per_clk_per_sm` (datasheet TFLOPS are
    often quoted at a clock a little below the boost). A sparse or FP16-accumulate figure in an unmarked entry
    doubles its rate and disagrees with its compute capability's others.

    Args:
        specs: registry id -> :class:`synperf.data.hardware.GPUSpec`.

    Returns:
        One line per disagreement, naming the GPU, the peak, its rate and the expected one; empty when none.
        Where the unmarked GPUs of a compute capability disagree with no majority rate, each of them is named.
    """
    out = []
    by_cc: dict[tuple[str, str], dict[str, float]] = {}
    for gid, spec in specs.items():
        for col in TENSOR_PEAKS:
            peak = spec.datasheet_value(col)
            if peak is not None:
                by_cc.setdefault((spec.compute_capability, col), {})[gid] = float(
                    2 ** round(math.log2(peak * 1e12 / (spec.sm_count * spec.clock_hz))))
    for (cc, col), rates in sorted(by_cc.items()):
        frac = {g: TENSOR_RATE[str(specs[g].raw.get("tensor_fp32_accumulate_rate", "full"))] for g in rates}
        full = Counter(rates[g] for g in rates if frac[g] == 1.0).most_common()
        if not full:
            continue
        ref, n = full[0]
        if len(full) > 1 and 2 * n <= sum(c for _, c in full):  # no majority among the unmarked GPUs
            out += [f"gpus.{g}.{col}: {rates[g]:g} FLOP/clk/SM, but the GPUs of compute capability {cc} without a "
                    f"tensor_fp32_accumulate_rate disagree ({sorted(r for r, _ in full)})"
                    for g in sorted(rates) if frac[g] == 1.0]
            continue
        out += [f"gpus.{g}.{col}: {rates[g]:g} FLOP/clk/SM where compute capability {cc}'s full rate is {ref:g} and "
                f"its tensor_fp32_accumulate_rate is {specs[g].raw.get('tensor_fp32_accumulate_rate', 'full')} "
                f"(a sparse or FP16-accumulate figure?)"
                for g in sorted(rates) if rates[g] != ref * frac[g]]
    return out


def check_tensor_rates(specs: Mapping[str, Any], path: Path) -> None:
    """Refuse a registry with a :func:`tensor_rate_mismatches` line.

    Raises:
        InputError: ``"<path>: gpus.l40.dense_bf16_tflops: 512 FLOP/clk/SM where compute capability 8.9's full rate
            is 1024 and its tensor_fp32_accumulate_rate is full (...)"`` (every mismatch, ``;``-joined).
    """
    bad = tensor_rate_mismatches(specs)
    if bad:
        raise InputError(f"{path}: " + "; ".join(bad))

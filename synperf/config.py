"""Pipeline configuration checks beyond the JSON schema (cross-references to the GPU registry)."""

from __future__ import annotations

from .io import InputError


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
    ingest = config.get("ingest", {})
    for src, key in (("vidur", "gpu_map"), ("pipeweave", "moe_gpu_map")):
        for name, gpu in (ingest.get(src, {}) or {}).get(key, {}).items():
            need(gpu, f"ingest.{src}.{key}.{name}")

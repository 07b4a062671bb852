"""Pipeline configuration checks beyond the JSON schema (cross-references to the GPU registry)."""

from __future__ import annotations

from synperf.data.io import InputError


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
    for key, names in (("ablation.experiments", config.get("ablation", {}).get("experiments", [])),
                       ("protocols.experiments", config.get("protocols", {}).get("experiments", [])),
                       ("protocols.configured_only", config.get("protocols", {}).get("configured_only", []))):
        for name in names:
            if name not in config.get("experiments", {}):
                raise InputError(f"config key {key}: {name!r} is not an experiment of `experiments`")
    if config.get("ablation", {}).get("groups") and config.get("feature_set") == "v1":
        raise InputError("config key ablation.groups: feature set v1 has no feature groups; use feature_set: v2 "
                         "or an empty ablation")
    ingest = config.get("ingest", {})
    for src, key in (("vidur", "gpu_map"), ("pipeweave", "moe_gpu_map")):
        for name, gpu in (ingest.get(src, {}) or {}).get(key, {}).items():
            need(gpu, f"ingest.{src}.{key}.{name}")


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

"""Pipeline configuration checks beyond the JSON schema (cross-references to the GPU registry)."""

from __future__ import annotations

from typing import Any, Mapping

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

"""``predict(kernel, params, gpu)``: latency predictions for callers outside the pipeline, in bulk.

Example::

    from synperf.api import predict
    df = predict("gemm", {"m": [1, 128, 4096], "n": 4096, "k": 4096, "dtype": "bfloat16"}, gpu="h200_sxm")
    df["predicted_latency_us"]

Models are those the pipeline trained (``models/<experiment>/``); by default the experiment of the kernel family
trained on the launches' dtype (:func:`route_experiment`: the one named like the family when it was, e.g. ``gemm``
for bfloat16, ``gemm_fp32_neusight`` for float32), and its fingerprint predictor (:mod:`synperf.model.fingerprint`:
the launch's spec-sheet pipe times with the GPU's constants, times a correction learned on the training GPUs).
"""

from __future__ import annotations

import inspect
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from synperf.data.hardware import Registry, load_registry
from synperf.data.io import InputError, brief_error, close_match
from synperf.data.launches import TENSOR_FAMILIES, check_launches, check_param_keys
from synperf.data.schema import KERNEL_PARAMS, LAUNCH_COLUMNS, conform
from synperf.model.estimator import TrainedModel
from synperf.model.features import FEATURE_SETS, build_features, primary_feature_set
from synperf.model.kernels.dtypes import DTYPE_BYTES

DEFAULT_IMPLEMENTATION = {
    "gemm": "cublas", "gemm_fp8": "torch_scaled_mm", "attention_prefill": "vllm_flash_attn",
    "attention_decode": "vllm_flash_attn", "rmsnorm": "vllm_rms_norm", "silu_mul": "vllm_silu_and_mul",
    "fused_moe": "triton_fused_moe",
}
DEFAULTS = {"batch": 1, "window_size": 0, "moe_tp_size": 1, "moe_ep_size": 1, "moe_stage": "full",
            "kv_cache_dtype": "bfloat16"}


@lru_cache(maxsize=32)
def _load(model_dir: str) -> TrainedModel:
    return TrainedModel.load(model_dir)


def default_paths() -> dict[str, Path]:
    """Where :func:`predict` looks when not told: this checkout's ``models/``, ``config/gpus.yaml``,
    ``data/hardware/`` (measured GPU values) and ``config/config.yaml`` (the primary ``feature_set``).

    The one place the package resolves checkout-relative paths, for the user entry point; every library
    function takes these as arguments, and the pipeline passes the configured ones.
    """
    root = Path(__file__).resolve().parent.parent
    return {"models_dir": root / "models", "registry": root / "config" / "gpus.yaml",
            "measured_dir": root / "data" / "hardware", "config": root / "config" / "config.yaml"}


def default_registry() -> Registry:
    """The registry :func:`predict` uses when not given one: :func:`synperf.data.hardware.load_registry` of
    :func:`default_paths`' ``registry`` and ``measured_dir``, parsed and validated once per version of those files
    (modification time and size of the YAML and of every file in the folder). The caller must not modify it.

    Raises:
        InputError: as :func:`synperf.data.hardware.load_registry`.
    """
    d = default_paths()

    def version(path: Path) -> tuple:
        try:
            st = path.stat()
        except OSError:
            return (str(path), None)
        return (str(path), st.st_mtime_ns, st.st_size)
    folder = Path(d["measured_dir"])
    files = tuple(version(f) for f in sorted(folder.iterdir())) if folder.is_dir() else ()
    return _registry_of(str(d["registry"]), str(folder), version(Path(d["registry"])), files)


@lru_cache(maxsize=4)
def _registry_of(path: str, measured_dir: str, version: tuple, files: tuple) -> Registry:
    """:func:`default_registry` of these paths; ``version`` and ``files`` only key the cache."""
    return load_registry(path, measured_dir)


def _config(config_path: Path) -> dict:
    """The parsed YAML file ``config_path`` (``{}`` when absent or unreadable); parsed once per version
    (modification time and size). The caller must not modify the result.

    Raises:
        InputError: the file is not YAML or not a mapping; the message names it.
    """
    try:
        st = Path(config_path).stat()
    except OSError:
        return {}
    return _config_of(str(config_path), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=8)
def _config_of(config_path: str, mtime_ns: int, size: int) -> dict:
    """:func:`_config` of ``config_path``; ``mtime_ns`` and ``size`` only key the cache."""
    import yaml

    try:
        cfg = yaml.safe_load(Path(config_path).read_text())
    except OSError:
        return {}
    except yaml.YAMLError as exc:
        raise InputError(f"{config_path}: not valid YAML ({brief_error(exc)})") from None
    if cfg is not None and not isinstance(cfg, dict):
        raise InputError(f"{config_path}: expected a YAML mapping, found {type(cfg).__name__}")
    return cfg or {}


def configured_experiments() -> dict:
    """The ``experiments`` block of the checkout's pipeline config (:func:`default_paths`), what :func:`predict`
    routes by when not given one; ``{}`` when the config is absent."""
    return _config(default_paths()["config"]).get("experiments") or {}


def _primary_feature_set(config_path: Path, experiment: str) -> str | None:
    """The primary feature set of ``experiment`` in ``config_path``: its entry's ``feature_set``, else the top-level
    one (None when absent)."""
    cfg = _config(config_path)
    try:
        return primary_feature_set((cfg.get("experiments") or {}).get(experiment) or {}, cfg.get("feature_set"))
    except AttributeError:
        return None


def _serves(kernel: str, dtype: str, trained) -> bool:
    """True when a model trained on the dtypes ``trained`` prices ``dtype`` of family ``kernel``: one of them, or,
    for the CUDA-core families (RMSNorm, SiLU&Mul, whose features see a dtype only through its element size), one
    of the same element size (bfloat16 and float16)."""
    if dtype in trained:
        return True
    if kernel in TENSOR_FAMILIES:
        return False
    return DTYPE_BYTES.get(dtype) in {DTYPE_BYTES.get(t) for t in trained}


def route_experiment(kernel: str, dtypes: pd.Series, experiment: str | None, experiments: dict,
                     where: str = "params") -> str:
    """The experiment whose model predicts launches of ``kernel`` with the row dtypes ``dtypes`` (rows of
    ``where``, which the messages name: the launches asked for, or the ``measured`` ones).

    ``experiments`` is the config's ``experiments`` block; an entry's ``dtypes`` are those it was trained on (its
    rows are selected by them). A named ``experiment`` must be of ``kernel`` and, where its ``dtypes`` are listed,
    trained on every row's dtype (:func:`_serves`); an experiment the config does not list is taken as named.
    Without one: the experiment named like ``kernel`` when it serves every row (or the config does not list its
    dtypes), else the first listed experiment of ``kernel`` that does.

    Raises:
        InputError: a named experiment of another family or not trained on a row's dtype (the message names the
            experiments that are), or no one experiment of ``kernel`` trained on every row's dtype.
    """
    ours = {name: e.get("dtypes") for name, e in experiments.items()
            if isinstance(e, dict) and e.get("kernel") == kernel}
    values = dtypes.astype(str).to_numpy()
    distinct = list(dict.fromkeys(values))

    def serving(dtype: str) -> list[str]:
        return [n for n, d in ours.items() if d and _serves(kernel, dtype, d)]

    def first_unserved(trained) -> int | None:
        bad = [d for d in distinct if not _serves(kernel, d, trained)]
        return None if not bad else int(np.flatnonzero(values == bad[0])[0])

    if experiment is not None:
        entry = experiments.get(experiment)
        if not isinstance(entry, dict):
            return experiment
        if entry.get("kernel") != kernel:
            raise InputError(f"experiment {experiment!r} models {entry.get('kernel')}, not {kernel}; experiments "
                             f"of {kernel}: {sorted(ours)}")
        i = first_unserved(entry.get("dtypes")) if entry.get("dtypes") else None
        if i is not None:
            raise InputError(f"{where} row {i}: dtype = {values[i]!r}, but experiment {experiment!r} was trained on "
                             f"{list(entry['dtypes'])}; experiments of {kernel} trained on {values[i]}: "
                             f"{serving(values[i])}")
        return experiment
    if not ours.get(kernel) or first_unserved(ours[kernel]) is None:
        return kernel
    for name, trained in ours.items():
        if trained and first_unserved(trained) is None:
            return name
    listed = {n: list(d) for n, d in ours.items() if d}
    if all(serving(d) for d in distinct):
        raise InputError(f"{where}: dtypes {distinct} have no one experiment of {kernel} trained on all of them "
                         f"({listed}); call predict once per dtype")
    i = next(int(np.flatnonzero(values == d)[0]) for d in distinct if not serving(d))
    raise InputError(f"{where} row {i}: dtype = {values[i]!r}: no model of {kernel} was trained on it; trained: "
                     f"{listed}")


def _is_listlike(v) -> bool:
    """Lists, tuples, ranges, numpy arrays and pandas Series/Index (not strings, not 0-d arrays)."""
    return isinstance(v, (list, tuple, range, pd.Series, pd.Index)) or (isinstance(v, np.ndarray) and v.ndim > 0)


def launch_table(kernel: str, params: dict | pd.DataFrame, gpu: str | list[str], registry: Registry) -> pd.DataFrame:
    """The canonical rows :func:`predict` models: ``params`` broadcast to a table, defaults filled in
    (:data:`DEFAULTS`, :data:`DEFAULT_IMPLEMENTATION`), no measured launch information (kernel name, grid).

    ``params`` values may be scalars (broadcast), lists, tuples, numpy arrays or pandas Series.

    Raises:
        InputError: unknown kernel or GPU, a parameter the family does not model
            (:func:`synperf.data.launches.check_param_keys`, with the closest allowed name), a missing parameter, or
            a launch no kernel runs (:func:`synperf.data.launches.check_launches`: a size that is not an integer
            >= 1, query heads not a multiple of KV heads, a dtype the GPU cannot run, a label outside its domain,
            top-k or the expert-parallel degree above the expert count); the message names the column and the row.
    """
    if kernel not in KERNEL_PARAMS:
        raise InputError(f"unknown kernel {kernel!r}{close_match(kernel, KERNEL_PARAMS)}; expected one of "
                         f"{sorted(KERNEL_PARAMS)}")
    check_param_keys(kernel, params)
    if isinstance(params, pd.DataFrame):
        df = params.reset_index(drop=True).copy()
    else:
        cols = {k: (list(v) if _is_listlike(v) else v) for k, v in params.items()}
        df = pd.DataFrame(cols, index=None if any(_is_listlike(v) for v in params.values()) else [0])
    gpus = list(gpu) if _is_listlike(gpu) else None
    if gpus is not None and len(gpus) != len(df):
        raise InputError(f"gpu: {len(gpus)} values for {len(df)} launches; expected one GPU or one per launch")
    ids = {g: registry.resolve(g) for g in dict.fromkeys(gpus if gpus is not None else [gpu])}
    df["gpu"] = [ids[g] for g in gpus] if gpus is not None else ids[gpu]
    df["kernel"] = kernel
    for col, val in {**DEFAULTS, "implementation": DEFAULT_IMPLEMENTATION[kernel]}.items():
        if col not in df.columns:
            df[col] = val
    if kernel == "attention_prefill" and "kv_len" not in df.columns and "seq_len" in df.columns:
        df["kv_len"] = df["seq_len"]
    if kernel == "attention_decode" and "seq_len" not in df.columns:
        df["seq_len"] = 1
    missing = [p for p in KERNEL_PARAMS[kernel] if p not in df.columns] + (["dtype"] if "dtype" not in df else [])
    if missing:
        raise InputError(f"params: kernel {kernel!r} needs {missing}" + (" (dtype e.g. 'bfloat16')"
                                                                          if "dtype" in missing else ""))
    check_launches(df, kernel, registry)
    df["latency_us"] = 1.0  # placeholder so the canonical table is complete; not used
    df["latency_stat"], df["source"], df["source_version"] = "predicted", "api", "api"
    return conform(df.drop(columns=[c for c in LAUNCH_COLUMNS if c in df.columns]))


def _check_feature_set(exp_dir: Path, feature_set: str) -> None:
    """Refuse a ``feature_set`` that is unknown or has no trained model (``<exp_dir>/<feature_set>-all``)."""
    if feature_set not in FEATURE_SETS:
        raise InputError(f"feature_set = {feature_set!r}{close_match(feature_set, FEATURE_SETS)}; expected one of "
                         f"{sorted(FEATURE_SETS)}")
    if not (exp_dir / f"{feature_set}-all" / "meta.json").exists():
        trained = sorted(d.name[:-len("-all")] for d in exp_dir.glob("*-all") if (d / "meta.json").exists())
        raise InputError(f"{exp_dir / f'{feature_set}-all'}: feature_set = {feature_set!r} has no trained model; "
                         f"trained: {trained}")


#: the model sets :func:`predict` chooses from (``models``)
MODEL_SETS = ("deploy", "evaluation")
#: folder of the deploy models under the models folder (``<models_dir>/deploy/<experiment>``)
DEPLOY_DIR = "deploy"


def model_set_dir(models_dir: Path, experiment: str, models: str | None) -> tuple[Path, str]:
    """The experiment folder of the model set ``models`` (``deploy``, ``evaluation`` or None: ``deploy`` where
    ``<models_dir>/deploy/<experiment>`` holds a fingerprint predictor, else ``evaluation``) and the set's name.

    Raises:
        InputError: ``models`` not one of :data:`MODEL_SETS`, or ``deploy`` without a deploy model of
            ``experiment`` (the message names the folder and the target that trains it).
    """
    if models is not None and models not in MODEL_SETS:
        raise InputError(f"models = {models!r}; expected one of {sorted(MODEL_SETS)} or None")
    from synperf.model.fingerprint import FINGERPRINT_FILE

    deploy = models_dir / DEPLOY_DIR / experiment
    has_deploy = (deploy / FINGERPRINT_FILE).is_file()
    if models == "deploy" and not has_deploy:
        raise InputError(f"{deploy}: no deploy model of {experiment!r}; run `snakemake --cores all deploy` first")
    if models != "evaluation" and has_deploy:
        return deploy, "deploy"
    return models_dir / experiment, "evaluation"


#: launches :func:`predict` models at a time unless told (``chunk_rows``): the features and predictions of one chunk
#: exist at once, so a call's peak memory grows with the chunk and the output columns, not
#: with the launch count (``benchmarks/predict_memory.py`` measures it)
CHUNK_ROWS = 200_000
#: rows the MLP takes per matrix product (:meth:`TrainedModel.predict_efficiency`'s ``batch``), counted from the
#: call's first row. A product's last rows past a multiple of 16 take another CPU kernel that rounds some of them
#: differently, so a row's prediction depends on where the blocks start; chunks are whole blocks
MLP_BLOCK_ROWS = inspect.signature(TrainedModel.predict_efficiency).parameters["batch"].default


def progress_reporter(desc: str, unit: str, min_total: int = 0) -> Callable[[int, int], None]:
    """A ``progress(done, total)`` callback that draws a tqdm bar on stderr when tqdm is installed, else a
    line ``<desc>: done/total <unit>``: redrawn in place every 5% on a terminal, one line per quarter when stderr
    is a file or pipe (a log); silent when ``total < min_total``."""
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    state: dict = {}

    def cb(done: int, total: int) -> None:
        if total < min_total:
            return
        if tqdm is not None:
            bar = state.setdefault("bar", tqdm(total=total, desc=desc, unit=unit, file=sys.stderr))
            bar.update(done - bar.n)
            if done == total:
                bar.close()
        else:
            tty = sys.stderr.isatty()
            parts = 20 if tty else 4
            if done == total or done * parts // total > state.get("parts", 0):
                state["parts"] = done * parts // total
                print(f"\r{desc}: {done}/{total} {unit}" if tty else f"{desc}: {done}/{total} {unit}",
                      end="\n" if done == total or not tty else "", file=sys.stderr, flush=True)
    return cb


def check_chunk_rows(chunk_rows) -> int:
    """The rows per chunk of :func:`predict` for ``chunk_rows`` (None: :data:`CHUNK_ROWS`): rounded up to a
    multiple of :data:`MLP_BLOCK_ROWS`, so that chunking leaves every MLP block as it is.

    Raises:
        InputError: not an integer >= 1 (the message names the value).
    """
    chunk_rows = CHUNK_ROWS if chunk_rows is None else chunk_rows
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
        raise InputError(f"chunk_rows = {chunk_rows!r}; expected an integer >= 1")
    return -(-int(chunk_rows) // MLP_BLOCK_ROWS) * MLP_BLOCK_ROWS


#: how :func:`predict` answers: ``fingerprint``, the experiment's fingerprint predictor (its GPU's constants times a
#: GPU-invariant correction, :mod:`synperf.model.fingerprint`), or ``mlp``, the SynPerf paper's efficiency MLP
#: (:mod:`synperf.model.estimator`), kept to compare with the paper
PREDICTORS = ("fingerprint", "mlp")
#: :func:`predict`'s default
DEFAULT_PREDICTOR = "fingerprint"


def predict(kernel: str, params: dict | pd.DataFrame, gpu: str | list[str], *, experiment: str | None = None,
            models_dir: str | os.PathLike | None = None, registry: Registry | None = None,
            feature_set: str | None = None, experiments: dict | None = None, chunk_rows: int | None = None,
            progress: bool | Callable[[int, int], None] = False, models: str | None = None,
            predictor: str | None = None, measured: pd.DataFrame | None = None) -> pd.DataFrame:
    """Predict latency for many launches of one kernel family.

    Args:
        kernel: family name (see :data:`synperf.data.schema.KERNELS`).
        params: kernel parameters as canonical column names (``m``, ``n``, ``k``, ``dtype``, ...),
            scalars broadcast against lists; or a DataFrame with those columns.
        gpu: registry id or a device name listed in the registry's ``device_names`` (``NVIDIA H100 80GB HBM3``),
            or one per row; the output's ``gpu`` column holds the registry id.
        experiment: model to use (default: :func:`route_experiment` by the rows' dtype: the experiment named like
            ``kernel`` when the config lists it as trained on that dtype, else the first one that is).
        models_dir: where trained models live (default: ``models_dir`` of :func:`default_paths`).
        models: which model set of ``models_dir`` answers (:func:`model_set_dir`): ``deploy`` (trained on every
            measured GPU, ``<models_dir>/deploy/<experiment>``, the ``deploy`` target), ``evaluation`` (the
            evaluation models, ``<models_dir>/<experiment>``, trained on the seen GPUs only), or None: the deploy
            model where the experiment has one, else the evaluation model.
        registry: the GPU registry (default: :func:`synperf.data.hardware.load_registry` of the ``registry``
            and ``measured_dir`` of :func:`default_paths`).
        experiments: the ``experiments`` block of the config the models in ``models_dir`` were trained with, which
            routes the rows by dtype (:func:`route_experiment`); default the ``config`` of :func:`default_paths`.
            A pipeline stage running another config passes its own.
        feature_set: with the ``mlp`` predictor, which MLP of the experiment
            (``models/<experiment>/<feature_set>-all``); default the experiment's primary feature set in the
            ``config`` of :func:`default_paths` (its entry's ``feature_set``, else the top-level one), else the first
            of v2_paper, v2, v1 that was trained. Giving it selects the ``mlp`` predictor.
        chunk_rows: launches modelled at a time (default :data:`CHUNK_ROWS`; rounded up to a multiple of
            :data:`MLP_BLOCK_ROWS`). Validation and the choice of experiment see every launch; every later step
            (features, pipe times, correction, MLP blocks, intervals) treats rows independently, so the result is
            the same, bit for bit, whatever the chunk size, and only the output columns grow with the launch count.
        progress: with more than one chunk, report progress after each chunk: True draws a bar on stderr
            (:func:`progress_reporter`), a callable gets ``(launches done, launches in total)``.
        predictor: one of :data:`PREDICTORS` (default ``fingerprint``, or ``mlp`` when ``feature_set`` is given).
            ``fingerprint`` answers from ``<experiment folder>/fingerprint.joblib`` (:func:`predict_fingerprint`,
            whose columns the output then has); ``mlp`` from the MLP folder.
        measured: few-shot, fingerprint predictor only: measured launches of GPUs the model did not train on (e.g.
            the short sweep of ``profiling.short``): the parameter columns, ``gpu`` (default: ``gpu`` when it names
            one GPU) and ``latency_us`` (microseconds). Each such GPU's constants are refitted on its rows and the
            correction those rows choose by cross-validation is applied
            (:func:`synperf.evaluation.fewshot.fewshot_predictor`); its rows' ``gpu_constants`` then say "few-shot
            fit on k rows".

    Returns:
        The canonical parameter columns plus ``theoretical_time_us``, ``predicted_efficiency``,
        ``predicted_latency_us`` (microseconds), ``predicted_latency_low_us`` and ``predicted_latency_high_us``
        (80% interval; NaN for the MLP), ``prediction_path`` (``fingerprint`` or ``mlp:<model folder>``),
        ``source_gpu`` (the near class-mate whose measurement of the same launch answers, :mod:`synperf.model.
        twins`; <NA> elsewhere and for the MLP), ``unknown_category`` (``column=value`` pairs of categorical
        features, e.g. an implementation label, that training never saw: less certain; empty when none) and
        ``model_set``, one row
        per launch; the fingerprint predictor adds ``fingerprint_time_us``, ``gpu_constants`` and ``evidence``
        (:func:`predict_fingerprint`). ``attrs``: ``model_dir``, ``model_set``, and for the fingerprint
        predictor ``training_gpus`` and ``interval``.

    Raises:
        InputError: ``chunk_rows`` not an integer >= 1, ``models`` not a model set or ``deploy`` without a deploy
            model of the experiment, what :func:`launch_table` refuses, a dtype the experiment
            was not trained on (:func:`route_experiment`), a ``feature_set`` that is not one of
            :data:`synperf.model.features.FEATURE_SETS` or was not trained for the experiment, ``feature_set`` with
            the ``fingerprint`` predictor, or no trained model; ``measured`` with the ``mlp`` predictor, without
            ``gpu`` or ``latency_us``, with a latency not finite and > 0, or of a GPU the model trained on.
    """
    chunk_rows = check_chunk_rows(chunk_rows)
    if predictor is not None and predictor not in PREDICTORS:
        raise InputError(f"predictor = {predictor!r}; expected one of {list(PREDICTORS)}")
    if predictor == "fingerprint" and feature_set is not None:
        raise InputError(f"feature_set = {feature_set!r} names an MLP; the fingerprint predictor has one model "
                         "per experiment (leave feature_set out, or pass predictor='mlp')")
    defaults = default_paths()
    registry = registry or default_registry()
    # validation and routing see the whole call: the experiment is chosen by every row's dtype
    table = launch_table(kernel, params, gpu, registry)
    if experiments is None:
        experiments = configured_experiments()
    experiment = route_experiment(kernel, table["dtype"], experiment, experiments)
    root = Path(models_dir or defaults["models_dir"])
    if experiment not in experiments and not any((d / experiment).is_dir() for d in (root, root / DEPLOY_DIR)):
        ours = sorted(n for n, e in experiments.items() if isinstance(e, dict) and e.get("kernel") == kernel)
        raise InputError(f"unknown experiment {experiment!r}: not in the config's experiments and no folder "
                         f"{root / experiment}; experiments of {kernel}: {ours}")
    exp_dir, model_set = model_set_dir(root, experiment, models)
    report = progress_reporter(f"predicting {kernel}", "launches") if progress is True else (progress or None)
    predictor = predictor or ("mlp" if feature_set is not None else DEFAULT_PREDICTOR)
    if measured is not None and predictor != "fingerprint":
        raise InputError("measured: few-shot refits the fingerprint predictor; leave predictor and feature_set out")
    if predictor == "fingerprint":
        if measured is not None and "gpu" not in measured.columns and isinstance(gpu, str):
            measured = measured.assign(gpu=gpu)
        if measured is not None:
            from synperf.evaluation.fewshot import check_measured

            measured = measured_table(kernel, measured, registry)
            route_experiment(kernel, measured["dtype"], experiment, experiments, "measured")   # dtypes it serves
            check_measured(measured, table, registry)
        return predict_fingerprint(table, registry, exp_dir, model_set, chunk_rows, report, measured=measured)
    if feature_set is not None:
        _check_feature_set(exp_dir, feature_set)
    primary = _primary_feature_set(defaults["config"], experiment)
    order = (feature_set, primary, "v2_paper", "v2", "v1")
    candidates = ([exp_dir / "mlp"] if model_set == "deploy" else []) + \
        [exp_dir / f"{fs}-all" for fs in dict.fromkeys(order) if fs] + [exp_dir]
    model_dir = next((d for d in candidates if (d / "meta.json").exists()), None)
    if model_dir is None:
        raise InputError(f"{exp_dir}: no trained MLP; run the pipeline (`snakemake --cores all`) first")
    out = table.drop(columns=["latency_us", "latency_stat", "source", "source_version", "source_file"])
    n = len(table)
    parts = []
    for start in range(0, max(n, 1), chunk_rows):
        parts.append(_predict_chunk(table.iloc[start:start + chunk_rows].reset_index(drop=True), registry, model_dir))
        if report is not None and n > chunk_rows:
            report(min(start + chunk_rows, n), n)
    del table
    pred = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
    del parts
    for c in pred.columns:
        out[c] = pred[c].to_numpy() if c == "source_gpu" else pred[c].array
    out["model_set"] = model_set
    out.attrs["model_dir"] = str(model_dir)
    out.attrs["model_set"] = model_set
    return out


def _predict_chunk(table: pd.DataFrame, registry: Registry, model_dir: Path) -> pd.DataFrame:
    """The MLP's output columns for the launch rows ``table`` (index ``0..len-1``): ``theoretical_time_us``,
    ``predicted_latency_us``, ``predicted_efficiency``, ``prediction_path``, ``unknown_category``, ``source_gpu``,
    ``predicted_latency_low_us``, ``predicted_latency_high_us`` (NaN); one row per launch, each from that row alone."""
    model = _load(str(model_dir))
    ff = build_features(table, registry, model.meta.get("feature_set", "v1"))
    out = pd.DataFrame(index=table.index)
    out["theoretical_time_us"] = ff.frame["theoretical_time_us"].to_numpy()
    out["predicted_latency_us"] = model.predict_latency_us(ff)
    out["predicted_efficiency"] = out["theoretical_time_us"] / out["predicted_latency_us"]
    out["prediction_path"] = f"mlp:{model_dir}"
    out["unknown_category"] = model.encoder.unknown.to_numpy()
    out["source_gpu"] = pd.Series([pd.NA] * len(out), dtype="string")
    out["predicted_latency_low_us"] = np.nan
    out["predicted_latency_high_us"] = np.nan
    return out


def measured_table(kernel: str, measured: pd.DataFrame, registry: Registry) -> pd.DataFrame:
    """``measured`` launches (parameter columns, ``gpu``, ``latency_us``) as canonical rows
    (:func:`launch_table`) with their measured ``latency_us``.

    Raises:
        InputError: no ``gpu`` or ``latency_us`` column, a latency that is not finite and > 0, or what
            :func:`launch_table` refuses.
    """
    missing = [c for c in ("gpu", "latency_us") if c not in measured.columns]
    if missing:
        raise InputError(f"measured: needs the columns {missing} beside the launch parameters")
    y = pd.to_numeric(measured["latency_us"], errors="coerce").to_numpy(dtype="float64")
    bad = np.flatnonzero(~(np.isfinite(y) & (y > 0)))
    if len(bad):
        raise InputError(f"measured: row {int(bad[0])}: latency_us = {measured['latency_us'].iloc[bad[0]]}; "
                         "expected a finite number > 0 (microseconds)")
    rows = measured.drop(columns=["gpu", "latency_us"]).reset_index(drop=True)
    try:
        out = launch_table(kernel, rows, measured["gpu"].astype(str).tolist(), registry)
    except InputError as e:   # these rows are the measured table's: say so in place of launch_table's "params"
        raise InputError(f"measured{str(e).removeprefix('params')}") from None
    out["latency_us"] = y
    return out


@lru_cache(maxsize=32)
def _load_fingerprint(path: str, mtime_ns: int):
    """The fingerprint predictor in ``path``; ``mtime_ns`` only keys the cache (a refit file is read again)."""
    from synperf.model.fingerprint import FingerprintModel

    return FingerprintModel.load(path)


def _fewshot_corrected(pred: pd.DataFrame, rows: pd.DataFrame, model, corrections: dict, registry) -> pd.DataFrame:
    """``pred`` (:meth:`FingerprintModel.describe` of ``rows``) with each few-shot GPU's fitted correction
    (``corrections``: GPU -> ``(name, fitted)`` of :func:`synperf.evaluation.fewshot.fewshot_predictor`) applied to
    its rows' point and bounds, held at the spec-sheet FLOP time, and named in ``gpu_constants``."""
    from synperf.evaluation.fewshot import needs_design
    from synperf.model.pipes import at_compute_bound

    gpus = rows["gpu"].astype(str).to_numpy()
    own = pred["twin_gpu"].astype(str).to_numpy() == gpus   # launches the GPU measured itself: as measured
    for gpu, (name, fitted) in corrections.items():
        on = (gpus == gpu) & ~own
        if not on.any():
            continue
        p = pred["predicted_latency_us"].to_numpy()[on]
        design = model.design(rows[on], registry) if needs_design(fitted) else None
        scale = fitted.apply(p, pred["theoretical_time_us"].to_numpy()[on], design) / p
        cols = ["predicted_latency_us", "predicted_latency_low_us", "predicted_latency_high_us"]
        pred.loc[on, cols] = np.column_stack(at_compute_bound(pred["compute_bound_us"].to_numpy()[on],
                                                              *(pred[c].to_numpy()[on] * scale for c in cols))[:3])
        pred.loc[on, "gpu_constants"] = pred.loc[on, "gpu_constants"].astype(str) + f"; then correction {name}"
    return pred


def predict_fingerprint(table: pd.DataFrame, registry: Registry, exp_dir: Path, model_set: str, chunk_rows: int,
                        report: Callable[[int, int], None] | None = None,
                        measured: pd.DataFrame | None = None) -> pd.DataFrame:
    """:func:`predict` with ``predictor="fingerprint"``: the launch rows ``table`` (of :func:`launch_table`)
    predicted by ``<exp_dir>/fingerprint.joblib`` ``chunk_rows`` at a time
    (:meth:`synperf.model.fingerprint.FingerprintModel.describe`); with ``measured``
    (:func:`measured_table` rows), refitted on them first
    (:func:`synperf.evaluation.fewshot.fewshot_predictor`).

    Returns:
        The canonical parameter columns plus ``theoretical_time_us``, ``predicted_latency_us``,
        ``predicted_efficiency``, ``predicted_latency_low_us`` and ``predicted_latency_high_us`` (80% interval),
        ``fingerprint_time_us``, ``gpu_constants`` (where the row GPU's constants came from: fitted on its
        measurements, or predicted from its class's training GPUs), ``evidence`` (which measurements taught the
        correction, or the near class-mate whose measurement of the same launch answers for a GPU without
        measurements: :mod:`synperf.model.twins`), ``unknown_category``, ``prediction_path`` (``fingerprint``),
        ``source_gpu`` (that class-mate, <NA> elsewhere) and
        ``model_set``; ``attrs``: ``model_dir`` (the file), ``model_set``, ``training_gpus``, ``interval``.

    Raises:
        InputError: no such file (the message names the target that fits it), a damaged one, or ``measured`` of
            a GPU the model trained on.
    """
    from synperf.model.fingerprint import FINGERPRINT_FILE

    path = exp_dir / FINGERPRINT_FILE
    if not path.is_file():
        target = "`snakemake --cores all deploy`" if model_set == "deploy" else "the pipeline (`snakemake --cores all`)"
        raise InputError(f"{exp_dir}: no trained model (no {FINGERPRINT_FILE}, the fingerprint predictor of "
                         f"{exp_dir.name!r}); run {target} first")
    model = _load_fingerprint(str(path), path.stat().st_mtime_ns)
    corrections = {}
    if measured is not None:
        from synperf.evaluation.fewshot import fewshot_predictor

        try:
            model, corrections = fewshot_predictor(model, measured, registry)
        except ValueError as err:
            raise InputError(f"measured: {err}") from None
    out = table.drop(columns=["latency_us", "latency_stat", "source", "source_version", "source_file"])
    n, parts = len(table), []
    for start in range(0, max(n, 1), chunk_rows):
        chunk = table.iloc[start:start + chunk_rows].reset_index(drop=True)
        parts.append(_fewshot_corrected(model.describe(chunk, registry), chunk, model, corrections, registry))
        if report is not None and n > chunk_rows:
            report(min(start + chunk_rows, n), n)
    pred = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
    for c in ("theoretical_time_us", "predicted_latency_us", "predicted_latency_low_us", "predicted_latency_high_us",
              "fingerprint_time_us", "gpu_constants", "evidence", "unknown_category"):
        out[c] = pred[c].to_numpy()
    out["predicted_efficiency"] = out["theoretical_time_us"] / out["predicted_latency_us"]
    out["prediction_path"] = "fingerprint"
    out["source_gpu"] = pd.Series(pred["twin_gpu"].to_numpy(), dtype="string", index=out.index).replace("", pd.NA)
    out["model_set"] = model_set
    out.attrs.update(model_dir=str(path), model_set=model_set, training_gpus=sorted(model.fitted),
                     interval=("80% interval from the correction's residuals with each training GPU left out "
                               "(for a GPU without measurements: the training GPUs' residuals when each was "
                               f"predicted from the others), widened by the spread of predicted constants ({path})"))
    return out

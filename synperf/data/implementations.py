"""The one table from an implementation label (the ``implementation`` column) to the kernel model that prices it.

Every label a source or the profiler writes is listed here with the model the decomposers use for it; a label
that is not listed is not modelled. Ingest drops such rows and counts them as
``unsupported_implementation:<family>:<label>``; :func:`synperf.api.predict` and the attention decomposers
refuse them with an :class:`~synperf.data.io.InputError` naming the column and the allowed labels.

Models (what the decomposers of :mod:`synperf.model.kernels` do with them):

* ``cublas``: cuBLAS / torch GEMM, tile from the launched kernel's name when recorded, else the tile rule of
  :mod:`synperf.model.kernels.gemm`;
* ``fp8_scaled_mm``: FP8 GEMM with 128x128 tiles (:mod:`synperf.model.kernels.gemm`);
* ``fa_vllm``: vLLM's FlashAttention backend, which runs FlashAttention-3 on compute capability 9.x and
  FlashAttention-2 elsewhere (public-data README, "kernel_source");
* ``fa2``: FlashAttention-2 on every architecture (PyTorch's SDPA flash backend vendors FlashAttention-2:
  ``aten/src/ATen/native/transformers/cuda/flash_attn``);
* ``flashinfer``: FlashInfer's prefill/decode kernels;
* ``triton_fused_moe``: vLLM's Triton fused-MoE kernel (:mod:`synperf.model.kernels.fused_moe`);
* ``rmsnorm`` / ``silu_mul``: one memory-bound pass (:mod:`synperf.model.kernels.norm_act`).

The cuBLAS kernel names a source records (NeuSight's ``Kernel Name``) are read here too
(:data:`TILE_NAME_PATTERNS`, :func:`parse_tile_name`), so that ingest and the GEMM decomposer share one parser.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from synperf.data.io import InputError, close_match

#: family -> {implementation label -> model}
IMPLEMENTATIONS: dict[str, dict[str, str]] = {
    "gemm": {"cublas": "cublas"},
    "gemm_fp8": {"vllm_fp8_per_tensor": "fp8_scaled_mm", "vllm_fp8_block": "fp8_scaled_mm",
                 "torch_scaled_mm": "fp8_scaled_mm"},
    "attention_prefill": {"vllm_flash_attn": "fa_vllm", "vllm_flashinfer": "flashinfer", "flashinfer": "flashinfer",
                          "torch_sdpa_flash": "fa2"},
    "attention_decode": {"vllm_flash_attn": "fa_vllm", "vllm_flashinfer": "flashinfer", "flashinfer": "flashinfer",
                         "torch_sdpa_flash": "fa2"},
    "rmsnorm": {"vllm_rms_norm": "rmsnorm", "flashinfer_rmsnorm": "rmsnorm", "triton_rmsnorm": "rmsnorm"},
    "silu_mul": {"vllm_silu_and_mul": "silu_mul", "flashinfer_silu_and_mul": "silu_mul",
                 "triton_silu_mul": "silu_mul"},
    "fused_moe": {"triton_fused_moe": "triton_fused_moe"},
}


def implementation_model(kernel: str, label: str, where: str = "implementation") -> str:
    """The model of implementation ``label`` in family ``kernel``.

    Raises:
        InputError: the label (or family) is not in :data:`IMPLEMENTATIONS`; the message names ``where``,
            the label and the allowed labels.
    """
    table = IMPLEMENTATIONS.get(kernel)
    if table is None:
        raise InputError(f"{where}: unknown kernel family {kernel!r}; expected one of {sorted(IMPLEMENTATIONS)}")
    model = table.get(str(label))
    if model is None:
        raise InputError(f"{where}: implementation = {label!r} is not modelled for {kernel}"
                         f"{close_match(label, table)}; expected one of {sorted(table)}")
    return model


def unsupported_mask(kernel: str, labels: pd.Series) -> pd.Series:
    """Boolean mask of the labels that :data:`IMPLEMENTATIONS` does not list for ``kernel`` (aligned with
    ``labels``)."""
    return ~labels.astype(str).isin(list(IMPLEMENTATIONS.get(kernel, {})))


def check_implementations(df: pd.DataFrame, kernel: str, where: str = "params") -> None:
    """Refuse the first row whose ``implementation`` is not listed for ``kernel``.

    Raises:
        InputError: ``"<where> row <i>: implementation = '<label>' is not modelled for <kernel>; expected one
            of [...]"``.
    """
    bad = unsupported_mask(kernel, df["implementation"]).to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        implementation_model(kernel, df["implementation"].iloc[i], where=f"{where} row {i}")


#: cuBLAS kernel-name patterns, tried in order: (scheme, regex with two tile groups, which group is our m).
#: Which number is m was checked on the NeuSight grids (grid CTAs = batch * ceil(m / tile_m) * ceil(n / tile_n)):
#:  * ``sm80_xmma_gemm_..._tilesize64x128x8_stage3_...`` (H100, 3,190 rows): M x N x K, first = m; exact on
#:    99.3% of the 880 non-square rows (the rest have batch > 65,535, where grid z is capped), 49% the other
#:    way round;
#:  * ``sgemm_32x32x32_NT[_vec]`` (P4, P100): M x N x K; only square tiles occur, first taken as m;
#:  * ``{maxwell,volta,ampere}_sgemm_128x64_{nn,tn}``, ``..._sliced1x4_tn`` and
#:    ``cutlass_80_simt_sgemm_128x128_8x4_nn_align1``: the first number tiles our n (cuBLAS is column-major:
#:    its m is our n), exact on 77-99% of rows per GPU against 31-92% the other way round.
TILE_NAME_PATTERNS = (
    ("xmma", re.compile(r"_tilesize(\d+)x(\d+)x\d+_"), 1),
    ("sgemm_mxnxk", re.compile(r"(?:^|_)sgemm_(\d+)x(\d+)x\d+_"), 1),
    ("sgemm_nxm", re.compile(r"_(\d+)x(\d+)_"), 2),
)


def parse_tile_name(kernel_name) -> tuple[int, int] | None:
    """(tile_m, tile_n) of a cuBLAS kernel name by :data:`TILE_NAME_PATTERNS`, in our GEMM's frame
    (``y[m, n] = x[m, k] @ W[n, k]^T``); None when no pattern matches."""
    name = str(kernel_name)
    for _, rx, m_group in TILE_NAME_PATTERNS:
        mt = rx.search(name)
        if mt:
            a, b = int(mt.group(1)), int(mt.group(2))
            return (a, b) if m_group == 1 else (b, a)
    return None

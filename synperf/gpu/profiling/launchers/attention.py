"""Attention launchers: prefill (causal over the prompt) and decode (one query token per sequence),
both over a paged KV cache.

* **FlashInfer** (``implementation: flashinfer``), when importable: ``BatchPrefillWithPagedKVCacheWrapper``
  and ``BatchDecodeWithPagedKVCacheWrapper`` on a 128 MiB workspace, KV layout ``NHD``: the cache is
  [pages, 2 (K, V), page_size, num_kv_heads, head_dim]; each sequence owns ``ceil(kv_len / page_size)``
  pages at random (shuffled) page ids, as a serving engine's block allocator leaves them. ``plan`` is
  called once per point, outside the timed region; ``run`` is what is timed. Decode uses the tensor-core
  kernel when the GQA group (query heads per KV head) is >= 4, as vLLM does.
* **torch SDPA** fallback (``implementation: torch_sdpa_<backend>``) when FlashInfer is missing, fails,
  or the point asks for ``backend: torch_sdpa``: ``scaled_dot_product_attention`` on contiguous
  [batch, heads, tokens, head_dim] tensors (no paging), GQA through ``enable_gqa``; the SDPA backend
  that runs first of flash, cuDNN, memory-efficient, math is the one recorded. The reason for a fallback
  is kept in the point's provenance.

The reference check recomputes up to 32 query rows of the first and last sequence in fp32 from the same
K/V (gathered from the pages), scale ``1/sqrt(head_dim)``, causal mask aligned bottom-right (query ``i``
of ``S`` sees keys ``<= i + kv_len - S``).
"""

from __future__ import annotations

import math

from synperf.gpu.profiling.grids import point_key
from synperf.gpu.profiling.launchers import (
    Case,
    Context,
    Unsupported,
    assert_close,
    check_first,
    generator,
    randn,
    sample_rows,
    torch_dtype,
)

WORKSPACE_BYTES = 128 << 20
SDPA_ORDER = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION", "MATH")


def prepare(point: dict, ctx: Context) -> Case:
    backend = point.get("backend", "auto")
    if backend not in ("auto", "flashinfer", "torch_sdpa"):
        raise Unsupported(f"attention backend {backend!r}: expected auto, flashinfer or torch_sdpa")
    reasons = []
    if backend in ("auto", "flashinfer"):
        if ctx.flashinfer is None:
            reasons.append(ctx.flashinfer_error)
        else:
            try:
                case = _flashinfer(point, ctx)
                case.check()  # a FlashInfer failure here falls back to SDPA instead of skipping the point
                case.check = None
                return case
            except Exception as exc:  # JIT build errors, unsupported head dims, ...
                reasons.append(f"flashinfer failed: {type(exc).__name__}: {str(exc)[:300]}")
        if backend == "flashinfer":
            raise Unsupported("; ".join(reasons))
    case = _sdpa(point, ctx)
    if reasons:
        case.details["fallback_reason"] = "; ".join(reasons)
    return case


def _shape(point: dict):
    b, s, kv_len = int(point["batch_size"]), int(point["seq_len"]), int(point["kv_len"])
    h, hkv, d = int(point["num_heads"]), int(point["num_kv_heads"]), int(point["head_dim"])
    if h % hkv:
        raise Unsupported(f"num_heads {h} is not a multiple of num_kv_heads {hkv}")
    if int(point.get("window_size") or 0):
        raise Unsupported("sliding-window attention is not profiled")
    return b, s, kv_len, h, hkv, d


def _reference(q_rows, k, v, rows, s, kv_len):
    """fp32 attention for query rows ``rows`` (positions in [0, s)) of one sequence.

    q_rows [r, H, D]; k, v [kv_len, Hkv, D]. Returns [r, H, D].
    """
    import torch

    h, hkv = q_rows.shape[1], k.shape[1]
    k = k.float().repeat_interleave(h // hkv, dim=1)
    v = v.float().repeat_interleave(h // hkv, dim=1)
    scores = torch.einsum("rhd,khd->hrk", q_rows.float(), k) / math.sqrt(q_rows.shape[2])
    keys = torch.arange(kv_len, device=k.device)
    allowed = keys[None, :] <= (rows[:, None] + (kv_len - s))
    scores = scores.masked_fill(~allowed[None], float("-inf"))
    return torch.einsum("hrk,khd->rhd", torch.softmax(scores, dim=-1), v)


def _flashinfer(point: dict, ctx: Context) -> Case:
    import torch

    fi = ctx.flashinfer
    b, s, kv_len, h, hkv, d = _shape(point)
    prefill = point["kernel"] == "attention_prefill"
    dt = torch_dtype(point["dtype"])
    kvdt = torch_dtype(point["kv_cache_dtype"])
    page = int(point.get("page_size", 16))
    gen = generator(ctx, point_key(point))
    dev = ctx.device
    pages_per_seq = -(-kv_len // page)
    total_pages = b * pages_per_seq
    ws = ctx.cache.get("flashinfer_workspace")
    if ws is None:
        ws = ctx.cache["flashinfer_workspace"] = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=dev)
    kv = randn((total_pages, 2, page, hkv, d), kvdt, ctx, gen)
    kv_indices = torch.randperm(total_pages, generator=gen, device=dev).to(torch.int32)
    kv_indptr = (torch.arange(b + 1, device=dev) * pages_per_seq).to(torch.int32)
    last_len = torch.full((b,), (kv_len - 1) % page + 1, dtype=torch.int32, device=dev)
    if prefill:
        q = randn((b * s, h, d), dt, ctx, gen)
        qo_indptr = (torch.arange(b + 1, device=dev) * s).to(torch.int32)
        wrapper = fi.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD")
        wrapper.plan(qo_indptr, kv_indptr, kv_indices, last_len, h, hkv, d, page, causal=True,
                     q_data_type=dt, kv_data_type=kvdt)
        call = "BatchPrefillWithPagedKVCacheWrapper(ws, 'NHD').run(q, kv_cache)"
        tc = None
    else:
        q = randn((b, h, d), dt, ctx, gen)
        tc = (h // hkv) >= 4
        wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=tc)
        wrapper.plan(kv_indptr, kv_indices, last_len, h, hkv, d, page, pos_encoding_mode="NONE",
                     q_data_type=dt, kv_data_type=kvdt)
        call = f"BatchDecodeWithPagedKVCacheWrapper(ws, 'NHD', use_tensor_cores={tc}).run(q, kv_cache)"
    out = torch.empty(q.shape, dtype=dt, device=dev)
    holder = {"out": out}
    try:
        wrapper.run(q, kv, out=out)

        def fn():
            wrapper.run(q, kv, out=out)
    except TypeError:  # FlashInfer versions whose run() has no out=
        def fn():
            holder["out"] = wrapper.run(q, kv)

    def compare() -> None:
        for seq in sorted({0, b - 1}):
            pages = kv_indices[kv_indptr[seq]:kv_indptr[seq + 1]].long()
            k = kv[pages, 0].reshape(-1, hkv, d)[:kv_len]
            v = kv[pages, 1].reshape(-1, hkv, d)[:kv_len]
            rows = sample_rows(s, 32, dev)
            qs = q[seq * s + rows] if prefill else q[seq:seq + 1]
            got = holder["out"][seq * s + rows] if prefill else holder["out"][seq:seq + 1]
            ref = _reference(qs, k, v, rows, s, kv_len)
            assert_close(got, ref, rtol=3e-2, atol=3e-2, what=f"flashinfer {point['kernel']} seq {seq}")

    details = {"call": call, "page_size": page, "kv_layout": "NHD", "pages": total_pages,
               "flashinfer_version": getattr(fi, "__version__", "unknown")}
    if tc is not None:
        details["use_tensor_cores"] = tc
    elem = torch.tensor([], dtype=kvdt).element_size()
    return Case(fn=fn, implementation="flashinfer", check=check_first(fn, compare), details=details,
                input_bytes=kv.numel() * elem + q.numel() * 2 * 2)


def _sdpa(point: dict, ctx: Context) -> Case:
    import torch
    import torch.nn.functional as F

    b, s, kv_len, h, hkv, d = _shape(point)
    if point["kv_cache_dtype"] == "fp8":
        raise Unsupported("torch SDPA has no fp8 KV cache; needs FlashInfer")
    dt = torch_dtype(point["dtype"])
    gen = generator(ctx, point_key(point))
    q = randn((b, h, s, d), dt, ctx, gen)
    k = randn((b, hkv, kv_len, d), dt, ctx, gen)
    v = randn((b, hkv, kv_len, d), dt, ctx, gen)
    out = {}
    causal = point["kernel"] == "attention_prefill"
    if causal and s != kv_len:
        raise Unsupported("torch SDPA's causal mask is top-left aligned: prefill needs seq_len == kv_len")
    gqa_kw = {"enable_gqa": True} if h != hkv else {}
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # torch < 2.3
        raise Unsupported(f"torch {torch.__version__} has no torch.nn.attention.sdpa_kernel") from None

    chosen, errors = None, []
    for name in SDPA_ORDER:
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            continue
        try:
            with sdpa_kernel([backend]):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa_kw)
            chosen = backend
            break
        except Exception as exc:  # "No available kernel" for unsupported shapes/dtypes/devices
            errors.append(f"{name}: {str(exc).splitlines()[0][:120]}")
    if chosen is None:
        raise Unsupported("no torch SDPA backend runs this shape: " + "; ".join(errors))

    def fn():
        with sdpa_kernel([chosen]):
            out["o"] = F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa_kw)

    def compare() -> None:
        for seq in sorted({0, b - 1}):
            rows = sample_rows(s, 32, ctx.device)
            ref = _reference(q[seq, :, rows].transpose(0, 1), k[seq].transpose(0, 1), v[seq].transpose(0, 1),
                             rows, s, kv_len)
            got = out["o"][seq, :, rows].transpose(0, 1)
            assert_close(got, ref, rtol=3e-2, atol=3e-2, what=f"torch sdpa {point['kernel']} seq {seq}")

    label = chosen.name.lower().replace("_attention", "")
    details = {"call": f"F.scaled_dot_product_attention(q, k, v, is_causal={causal}, enable_gqa={h != hkv}) "
                       f"under sdpa_kernel([{chosen.name}])", "sdpa_backend": chosen.name, "kv_layout": "contiguous",
               "skipped_backends": errors}
    return Case(fn=fn, implementation=f"torch_sdpa_{label}", check=check_first(fn, compare), details=details,
                input_bytes=(q.numel() + k.numel() + v.numel()) * 2)

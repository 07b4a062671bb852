"""A Hugging Face ``config.json`` as the shapes the workload generator needs, and their TP/PP sharding.

Supported: decoder-only transformers with (grouped-query) multi-head attention, RMSNorm, a gated SiLU MLP
(Llama, Qwen2/2.5, Qwen3, Mistral without sliding window) and their MoE variants (Mixtral:
``num_local_experts``/``num_experts_per_tok``/``intermediate_size``; Qwen2-MoE/Qwen3-MoE: ``num_experts``/
``num_experts_per_tok``/``moe_intermediate_size`` and ``shared_expert_intermediate_size``).

Not modelled (:class:`InputError` naming the field): multi-head latent attention (``kv_lora_rank``,
``q_lora_rank``), sliding-window attention (``use_sliding_window: true``, or a Mistral-style
``sliding_window`` shorter than ``max_position_embeddings`` without a ``use_sliding_window`` switch),
encoder-decoder models (``is_encoder_decoder: true``), and configs without ``num_hidden_layers`` etc.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ._deps import InputError, close_match


@dataclass(frozen=True)
class ModelConfig:
    """Unsharded model shape (elements, not bytes).

    Attributes:
        name: the config's file stem (or ``architectures[0]``).
        architecture: ``architectures[0]`` of the config, e.g. ``Qwen2ForCausalLM``.
        num_layers, hidden_size, num_heads, num_kv_heads, head_dim, intermediate_size, vocab_size: as in
            the HF config (``head_dim`` defaults to ``hidden_size // num_attention_heads``).
        num_experts: routed experts (0 for a dense model); ``num_experts_per_tok`` experts per token;
            ``moe_intermediate_size`` each expert's intermediate width; ``shared_expert_intermediate_size``
            the always-on shared expert's width (Qwen2-MoE; 0 when absent).
        dtype: the weights/activations dtype served: the config's (``torch_dtype``, or ``dtype``, its newer name),
            except that a float32 config, or one naming none, is served in bfloat16, as vLLM's ``--dtype auto``
            does on sm_80 and later GPUs (``vllm/config``, ``_resolve_auto_dtype``: float32 is downcast to the
            platform's first supported dtype; a config without a dtype reads as float32 when the weights' metadata
            does not say otherwise).
        dtype_field: the config key that named the dtype (``torch_dtype`` or ``dtype``); empty when it names none.
        config_dtype: the dtype the config names; empty when it names none.
        max_position_embeddings: the context limit (vLLM's default ``max_model_len``), tokens; None if absent.
        qk_norm: RMSNorm of queries and keys in every layer (Qwen3: ``model_type`` qwen3/qwen3_moe; MiniMax-M2:
            ``use_qk_norm``); ``qk_norm_type`` ``per_head`` (rows = tokens x heads, width head_dim) or ``per_layer``
            (MiniMax-M2 ``qk_norm_type``: rows = tokens, width heads x head_dim).
        moe_dtype: the routed experts' weight dtype as the ``fused_moe`` family names it: ``fp8_block`` for a
            ``quantization_config`` with ``quant_method: fp8`` and ``weight_block_size`` (vLLM's block-scaled FP8 MoE),
            ``fp8`` without a block size (per-tensor), empty = ``dtype``. The other linear layers of such a checkpoint
            are priced at ``dtype`` by the e2e composer (block-FP8 linear layers are not a modelled family).
    """

    name: str
    architecture: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    dtype: str = "bfloat16"
    dtype_field: str = "torch_dtype"
    config_dtype: str = "bfloat16"
    max_position_embeddings: int | None = None
    qk_norm: bool = False
    moe_dtype: str = ""
    qk_norm_type: str = "per_head"

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def shard(self, tp: int = 1, pp: int = 1) -> "ShardedModel":
        """The per-GPU shapes under tensor parallelism ``tp`` and pipeline parallelism ``pp``.

        Raises:
            InputError: ``tp``/``pp`` < 1, heads not divisible by ``tp``, KV heads neither a multiple nor a
                divisor of ``tp``, intermediate (or expert) width not divisible by ``tp``, more stages than layers.
        """
        if tp < 1 or pp < 1:
            raise InputError(f"{self.name}: tp and pp must be >= 1 (got tp={tp}, pp={pp})")
        if self.num_heads % tp:
            raise InputError(f"{self.name}: num_attention_heads={self.num_heads} is not divisible by tp={tp}")
        if self.num_kv_heads % tp and tp % self.num_kv_heads:
            raise InputError(f"{self.name}: num_key_value_heads={self.num_kv_heads} neither divides nor is a "
                             f"multiple of tp={tp}")
        # an MoE model's intermediate_size is no layer's width (every layer is sparse): not checked
        for field, val in (("intermediate_size", 0 if self.is_moe else self.intermediate_size),
                           ("moe_intermediate_size", self.moe_intermediate_size),
                           ("shared_expert_intermediate_size", self.shared_expert_intermediate_size)):
            if val % tp:
                raise InputError(f"{self.name}: {field}={val} is not divisible by tp={tp}")
        if pp > self.num_layers:
            raise InputError(f"{self.name}: pp={pp} exceeds num_hidden_layers={self.num_layers}")
        base, extra = divmod(self.num_layers, pp)
        # vLLM's default partition: equal stages, the remainder layers go to the last stages
        stages = tuple(base + (1 if i >= pp - extra else 0) for i in range(pp))
        return ShardedModel(
            model=self, tp=tp, pp=pp, num_heads=self.num_heads // tp,
            num_kv_heads=max(1, self.num_kv_heads // tp),  # replicated when kv_heads < tp
            intermediate_size=self.intermediate_size // tp,
            moe_intermediate_size=self.moe_intermediate_size // tp,
            shared_expert_intermediate_size=self.shared_expert_intermediate_size // tp,
            layers_per_stage=stages)


@dataclass(frozen=True)
class ShardedModel:
    """Per-GPU shapes: heads, KV heads (``max(1, kv_heads // tp)``: replicated when ``kv_heads < tp``),
    dense and expert intermediate widths divided by ``tp`` (experts are tensor-parallel inside each expert,
    all experts on every GPU, as vLLM's fused MoE without expert parallelism); ``layers_per_stage`` the
    pipeline split (remainder layers on the last stages)."""

    model: ModelConfig
    tp: int
    pp: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int
    layers_per_stage: tuple[int, ...]

    @property
    def qkv_out(self) -> int:
        """Output width of the fused QKV projection on one GPU: ``(heads + 2 * kv_heads) * head_dim``."""
        return (self.num_heads + 2 * self.num_kv_heads) * self.model.head_dim

    @property
    def attn_out(self) -> int:
        """Input width of ``o_proj`` on one GPU: ``heads * head_dim``."""
        return self.num_heads * self.model.head_dim


def _int(cfg: dict, key: str, where: str, default=None, minimum: int | None = None) -> int:
    """Config field ``key`` as an integer (``default`` where it is missing or null), at least ``minimum`` when
    given.

    Raises:
        InputError: missing without a default, not a JSON integer (a fraction such as 4096.7, a bool, text
            such as "32"), or below ``minimum``.
    """
    val = cfg.get(key)
    if val is None:
        val = default
    if val is None:
        raise InputError(f"{where}: missing config field {key!r}")
    try:
        if isinstance(val, (bool, str)) or (isinstance(val, float) and not val.is_integer()):
            raise ValueError
        out = int(val)
    except (TypeError, ValueError):
        raise InputError(f"{where}: config field {key!r} must be an integer, got {val!r}") from None
    if minimum is not None and out < minimum:
        raise InputError(f"{where}: config field {key!r} must be >= {minimum}, got {val!r}")
    return out


def _bool(cfg: dict, key: str, where: str) -> bool:
    """Config field ``key`` as a JSON ``true``/``false`` (False where missing or null).

    Raises:
        InputError: any other value (text such as "false" would otherwise read as true).
    """
    val = cfg.get(key)
    if val is None:
        return False
    if not isinstance(val, bool):
        raise InputError(f"{where}: config field {key!r} must be true or false, got {val!r}")
    return val


#: the config fields :func:`parse_config` reads; a field of the config spelled close to one of them that the config
#: lacks is refused as a likely misspelling (``num_key_value_head``), since a missing optional field has a default
READ_FIELDS = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size",
               "vocab_size", "num_hidden_layers", "num_local_experts", "num_experts", "num_experts_per_tok",
               "moe_intermediate_size", "shared_expert_intermediate_size", "torch_dtype", "dtype",
               "max_position_embeddings", "sliding_window", "use_sliding_window", "model_type", "architectures",
               "hidden_act", "quantization_config", "use_qk_norm", "qk_norm_type", "decoder_sparse_step",
               "mlp_only_layers", "is_encoder_decoder", "text_config")
#: the weights/activations dtypes a config may name (``torch_dtype`` or ``dtype``, torch's names)
MODEL_DTYPES = ("bfloat16", "float16", "float32")


def _check_spelling(cfg: dict, where: str) -> None:
    """Refuse a field that is not one :data:`READ_FIELDS` names but is spelled within difflib's 0.9 ratio of one
    the config lacks."""
    import difflib

    absent = [f for f in READ_FIELDS if f not in cfg]
    for key in cfg:
        if key in READ_FIELDS:
            continue
        near = difflib.get_close_matches(str(key), absent, n=1, cutoff=0.9)
        if near:
            raise InputError(f"{where}: config field {key!r} is not read; did you mean {near[0]!r}?")


def _dtype(cfg: dict, where: str) -> tuple[str, str]:
    """``(key, value)`` of ``torch_dtype`` (or ``dtype``, its newer name); both empty when the config names neither.

    Raises:
        InputError: a name outside :data:`MODEL_DTYPES`, or both fields with different values.
    """
    named = {k: str(cfg[k]) for k in ("torch_dtype", "dtype") if cfg.get(k) is not None}
    if len(set(named.values())) > 1:
        raise InputError(f"{where}: torch_dtype={named['torch_dtype']!r} and dtype={named['dtype']!r} differ")
    if not named:
        return "", ""
    key, val = next(iter(named.items()))
    if val not in MODEL_DTYPES:
        raise InputError(f"{where}: {key}={val!r}{close_match(val, MODEL_DTYPES)}: expected one of "
                         f"{list(MODEL_DTYPES)}")
    return key, val


#: the decoder families the composer models, by ``model_type`` and by ``architectures[0]``: pre-norm decoders with
#: RMSNorm, rotary GQA attention and SiLU-gated MLPs (dense, or Mixtral/Qwen-MoE routed experts in every layer)
MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe", "minimax_m2")
ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                 "MixtralForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "MiniMaxM2ForCausalLM")
#: the MLP activations of a SiLU-gated MLP (SiLU&Mul), the only MLP the composer prices
GATED_SILU = ("silu", "swish")
#: config fields of MoE layouts the composer does not price (DeepSeek's routed plus shared experts and leading dense
#: layers; Qwen-MoE's dense layers between sparse ones), each refused by name
UNMODELLED_MOE_FIELDS = ("n_routed_experts", "n_shared_experts", "first_k_dense_replace", "moe_layer_freq")


def _is_moe(cfg: dict) -> bool:
    return bool(cfg.get("num_local_experts") or cfg.get("num_experts"))


def _moe_fp8(cfg: dict) -> str:
    """The routed experts' ``fused_moe`` dtype of an FP8 ``quantization_config`` (``quant_method: fp8``, dynamic
    activation scales): ``fp8_block`` with ``weight_block_size`` [128, 128] (the block the family was measured with),
    ``fp8`` without one; empty for any other quantization (refused by :func:`_check_modelled`)."""
    q = cfg.get("quantization_config")
    if not isinstance(q, dict) or q.get("quant_method") != "fp8" or q.get("activation_scheme", "dynamic") != "dynamic":
        return ""
    block = q.get("weight_block_size")
    if block is None:
        return "fp8"
    return "fp8_block" if block == [128, 128] else ""


def _check_modelled(cfg: dict, where: str) -> None:
    """Refuse, naming the field, a config whose math the composer would get wrong: an unrecognised ``model_type``
    or ``architectures[0]`` (a config with neither is read as a generic decoder of the recognised kind), a
    non-SiLU-gated MLP (``hidden_act``), quantized weights (``quantization_config``) other than an MoE model's FP8
    (:func:`_moe_fp8`), a shared expert of an MoE layout the composer does not price, or an MoE layout other than
    routed experts in every layer."""
    mt = cfg.get("model_type")
    if mt is not None and str(mt) not in MODEL_TYPES:
        raise InputError(f"{where}: model_type={mt!r} is not a modelled decoder family; modelled: {list(MODEL_TYPES)}")
    archs = cfg.get("architectures")
    if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
        raise InputError(f"{where}: config field 'architectures' must be a list of class names, got {archs!r}")
    if archs and str(archs[0]) not in ARCHITECTURES:
        raise InputError(f"{where}: architectures[0]={archs[0]!r} is not modelled; modelled: {list(ARCHITECTURES)}")
    act = cfg.get("hidden_act", cfg.get("hidden_activation"))
    if act is not None and str(act) not in GATED_SILU:
        raise InputError(f"{where}: hidden_act={act!r}: only SiLU-gated MLPs (SiLU&Mul) are modelled")
    quant = cfg.get("quantization_config")
    if quant and not (_moe_fp8(cfg) and _is_moe(cfg)):
        method = quant.get("quant_method") if isinstance(quant, dict) else quant
        raise InputError(f"{where}: quantization_config (quant_method={method!r}): quantized models are not modelled; "
                         f"the composer prices torch_dtype weights and activations")
    for field in UNMODELLED_MOE_FIELDS:
        if cfg.get(field) not in (None, 0):
            raise InputError(f"{where}: {field}={cfg[field]!r}: this MoE layout (shared experts or dense layers "
                             "between sparse ones) is not modelled")
    if _int(cfg, "shared_intermediate_size", where, 0, minimum=0):
        raise InputError(f"{where}: shared_intermediate_size={cfg['shared_intermediate_size']!r}: MiniMax-style shared "
                         "experts are not modelled")
    if _bool(cfg, "use_qk_norm", where) and cfg.get("qk_norm_type", "per_layer") not in ("per_layer", "per_head"):
        raise InputError(f"{where}: qk_norm_type={cfg['qk_norm_type']!r}: expected per_layer or per_head")
    if _int(cfg, "decoder_sparse_step", where, 1) != 1 or cfg.get("mlp_only_layers"):
        raise InputError(f"{where}: decoder_sparse_step={cfg.get('decoder_sparse_step')!r}, mlp_only_layers="
                         f"{cfg.get('mlp_only_layers')!r}: dense layers between sparse ones are not modelled")


def parse_config(cfg: dict, name: str = "model", where: str | None = None) -> ModelConfig:
    """Parse a Hugging Face config dict into a :class:`ModelConfig`.

    Raises:
        InputError: an architecture that is not modelled (the message names the config field:
            ``kv_lora_rank``/``q_lora_rank``, ``use_sliding_window``, ``sliding_window``,
            ``is_encoder_decoder``, and those of :func:`_check_modelled`: ``model_type``, ``architectures``,
            ``hidden_act``, ``quantization_config``, :data:`UNMODELLED_MOE_FIELDS`) or a missing/non-integer required
            field.
    """
    where = where or name
    if not isinstance(cfg, dict):
        raise InputError(f"{where}: a config must be a JSON object")
    for sub in (cfg, cfg.get("text_config") or {}):  # MLA first: a multimodal MLA model (Kimi-K2.5) names its reason
        for mla in ("kv_lora_rank", "q_lora_rank"):
            if isinstance(sub, dict) and sub.get(mla) is not None:
                raise InputError(f"{where}: {mla}={sub[mla]!r}: MLA attention not modelled "
                                 "(multi-head latent attention)")
    if cfg.get("text_config") and "num_hidden_layers" not in cfg:
        raise InputError(f"{where}: multimodal config (text_config) is not modelled; pass the text model's config")
    _check_modelled(cfg, where)
    _check_spelling(cfg, where)
    if _bool(cfg, "is_encoder_decoder", where):
        raise InputError(f"{where}: is_encoder_decoder=true: encoder-decoder models are not modelled")
    if _bool(cfg, "use_sliding_window", where):
        raise InputError(f"{where}: use_sliding_window=true (sliding_window={cfg.get('sliding_window')!r}): "
                         "sliding-window attention is not modelled")
    sw = _int(cfg, "sliding_window", where) if cfg.get("sliding_window") is not None else None
    maxpos = (_int(cfg, "max_position_embeddings", where, minimum=1) if cfg.get("max_position_embeddings") is not None
              else None)
    if "use_sliding_window" not in cfg and sw is not None and (maxpos is None or sw < maxpos):
        raise InputError(f"{where}: sliding_window={sw!r} applies to every layer (no use_sliding_window switch): "
                         "sliding-window attention is not modelled")
    hidden = _int(cfg, "hidden_size", where, minimum=1)
    heads = _int(cfg, "num_attention_heads", where, minimum=1)
    kv_heads = _int(cfg, "num_key_value_heads", where, heads, minimum=1)
    if heads % kv_heads:
        raise InputError(f"{where}: num_key_value_heads={kv_heads} does not divide num_attention_heads={heads} "
                         "(grouped-query attention shares each KV head among a whole number of query heads)")
    experts_key = "num_local_experts" if cfg.get("num_local_experts") is not None else "num_experts"
    num_experts = _int(cfg, experts_key, where, 0, minimum=0)
    moe_inter = 0
    if num_experts:
        # Mixtral and MiniMax (num_local_experts): the experts' width is intermediate_size unless
        # moe_intermediate_size is given; Qwen-MoE (num_experts): moe_intermediate_size, required (its
        # intermediate_size is the dense MLP's width, not an expert's)
        moe_inter = _int(cfg, "moe_intermediate_size", where, minimum=1) \
            if "moe_intermediate_size" in cfg or experts_key == "num_experts" \
            else _int(cfg, "intermediate_size", where, minimum=1)
    arch = (cfg.get("architectures") or [cfg.get("model_type", "unknown")])[0]
    dtype_field, config_dtype = _dtype(cfg, where)
    return ModelConfig(
        name=name, architecture=str(arch), num_layers=_int(cfg, "num_hidden_layers", where, minimum=1),
        hidden_size=hidden, num_heads=heads, num_kv_heads=kv_heads,
        head_dim=_int(cfg, "head_dim", where, hidden // heads, minimum=1),
        intermediate_size=_int(cfg, "intermediate_size", where, moe_inter if num_experts else None, minimum=1),
        vocab_size=_int(cfg, "vocab_size", where, minimum=1), num_experts=num_experts,
        num_experts_per_tok=_int(cfg, "num_experts_per_tok", where, minimum=1) if num_experts else 0,
        moe_intermediate_size=moe_inter,
        shared_expert_intermediate_size=_int(cfg, "shared_expert_intermediate_size", where, 0, minimum=0)
        if num_experts else 0,
        dtype="bfloat16" if config_dtype in ("", "float32") else config_dtype, dtype_field=dtype_field,
        config_dtype=config_dtype,
        max_position_embeddings=maxpos,
        qk_norm=(str(cfg.get("model_type", "")).startswith("qwen3") or str(arch).startswith("Qwen3")
                 or _bool(cfg, "use_qk_norm", where)),
        qk_norm_type=str(cfg.get("qk_norm_type", "per_layer")) if _bool(cfg, "use_qk_norm", where) else "per_head",
        moe_dtype=_moe_fp8(cfg) if num_experts else "")


def load_model_config(path: str | os.PathLike) -> ModelConfig:
    """Read and parse a Hugging Face ``config.json`` (name = file stem).

    Raises:
        InputError: unreadable or invalid JSON, or :func:`parse_config`'s errors.
    """
    p = Path(path)
    try:
        cfg = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"{p}: cannot read model config: {e}") from None
    return parse_config(cfg, name=p.stem, where=str(p))

"""What every architecture shares: the derived ``max_model_len``, the KV heads of one
tensor-parallel rank, vLLM's head-divisibility refusals and the pipeline-parallel layer split."""

from __future__ import annotations

import math
from typing import Any, Callable

import attrs

from ..models.geometry import MultipleOf
from .hf import CONFIG_FIELD, CONFIG_PARALLEL, ConfigError, HFConfig

__all__ = ["divide", "frozen", "plain", "Parallel", "derived_max_model_len", "kv_heads_per_rank", "check_attention_heads", "pp_ranges",
           "Layer", "Model"]

#: ``ModelArchConfigConvertorBase.derive_max_model_len_and_key``
#: (vllm/transformers_utils/model_arch_config_convertor.py:374-407): the smallest of these keys.
MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
#: RoPE types whose ``factor`` vLLM does not apply again (vllm/config/model.py:2610-2621).
SCALED_ROPE_TYPES = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")


@attrs.frozen
class Parallel:
    """The engine a config's layers are built for: the parallel sizes and the Mamba cache mode
    (``none`` or ``align``: align iff prefix caching is on, as ``MambaModelConfig`` sets it,
    model_executor/models/config.py:763-787), which some Mamba-like layers' specs depend on."""

    tp: int
    pp: int
    mamba_cache_mode: str = "align"


@attrs.frozen
class Layer:
    """One layer's KV cache spec: its vLLM layer name (``{i}`` for the index), index and the
    geometry fields of its spec (``kvproof/models/geometry.py`` ``LayerEntry``)."""

    name: str
    index: int
    spec: str
    fields: tuple[tuple[str, object], ...]
    #: The decoder layer it belongs to, which decides its pipeline rank (``index`` unless the name
    #: numbers it apart, as Falcon-H1's Mamba branch).
    decoder_index: int | None = None

    @property
    def rank_index(self) -> int:
        return self.index if self.decoder_index is None else self.decoder_index


@attrs.frozen
class Model:
    """What an architecture maps to when its layers alone do not say it all: the layers, the
    top-level geometry fields vLLM's default platform fixes for the model (``settings``, which
    ``--set`` overrides), and ``complete``, which fills what depends on the engine's plan once the
    geometry's settings are known (the geometry in, the geometry out)."""

    layers: list[Layer]
    settings: dict[str, Any] = attrs.field(factory=dict)
    complete: Callable[[dict[str, Any]], dict[str, Any]] | None = None


def frozen(value):
    """Lists as tuples, so that a layer's fields hash and equal layers group into one entry."""
    return tuple(frozen(v) for v in value) if isinstance(value, (list, tuple)) else value


def plain(value):
    """The JSON form of a :func:`frozen` value (a ``MultipleOf`` as the geometry writes it)."""
    if isinstance(value, MultipleOf):
        return {"MultipleOf": value.base}
    return [plain(v) for v in value] if isinstance(value, tuple) else value


def derived_max_model_len(config: HFConfig) -> int:
    """``max_model_len`` when none is given: ``_get_and_verify_max_len``
    (vllm/config/model.py:2545-2676) with the platform's ``check_max_model_len`` (identity on
    CUDA). The smallest length key, then ``model_max_length`` when set; 2048 without any
    (model.py:2578-2593); times the RoPE ``factor`` unless the RoPE type is already scaled or the
    model is Gemma 3 (model.py:2600-2634); LongRoPE takes ``original_max_position_embeddings``
    (model.py:2643-2650)."""
    derived = None
    for key in MAX_LEN_KEYS:
        value = config.tree.get(key)
        if value is not None:
            if type(value) not in (int, float) or isinstance(value, bool) or not math.isfinite(value):
                raise ConfigError(CONFIG_FIELD, config.key_path(key), "expected a finite number", config.file)
            derived = value if derived is None else min(derived, value)
    if config.tree.get("model_max_length"):
        derived = config.tree["model_max_length"]
    if derived is None:
        derived = 2048
    rope = config.tree.get("rope_parameters") or config.tree.get("rope_scaling")
    rope_types = []
    # Gemma 3's max_position_embeddings is already scaled (model.py:2600-2603: "gemma3" in model_type)
    rope_scaled_already = "gemma3" in str(config.tree.get("model_type", ""))
    if isinstance(rope, dict):
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        rope_types.append(rope_type)
        if not rope_scaled_already and rope_type not in SCALED_ROPE_TYPES and rope_type != "default":
            factor = rope.get("factor")
            derived *= 1.0 if factor is None else factor
    if "longrope" in rope_types:
        return int(config.tree.get("original_max_position_embeddings", derived))
    return int(derived)


def divide(config: HFConfig, numerator: int, tp: int, key: str) -> int:
    """``vllm.distributed.utils.divide``: an exact division, else vLLM's assertion text
    (``ensure_divisibility``, vllm/distributed/utils.py:51-55)."""
    if numerator % tp != 0:
        raise ConfigError(CONFIG_PARALLEL, config.key_path(key), f"{numerator} is not divisible by {tp}", config.file)
    return numerator // tp


def check_attention_heads(config: HFConfig, total_heads: int, key: str, tp: int) -> None:
    """``ModelConfig.verify_with_parallel_config`` (vllm/config/model.py:1557-1564)."""
    if total_heads % tp != 0:
        raise ConfigError(CONFIG_PARALLEL, config.key_path(key),
                          f"Total number of attention heads ({total_heads}) must be divisible by tensor "
                          f"parallel size ({tp}).", config.file)


def kv_heads_per_rank(config: HFConfig, total_kv_heads: int, key: str, tp: int) -> int:
    """KV heads of one rank: partitioned when there are at least ``tp`` of them, else replicated
    (``max(1, total // tp)``); vLLM asserts that one divides the other (llama.py:147-156 and the
    same lines of every GQA attention class)."""
    if total_kv_heads >= tp and total_kv_heads % tp != 0:
        raise ConfigError(CONFIG_PARALLEL, config.key_path(key),
                          f"{total_kv_heads} KV heads cannot be partitioned over tensor parallel size {tp} "
                          "(vLLM 0.33.0 asserts total_num_kv_heads % tp_size == 0, llama.py:151)", config.file)
    if total_kv_heads < tp and tp % total_kv_heads != 0:
        raise ConfigError(CONFIG_PARALLEL, config.key_path(key),
                          f"{total_kv_heads} KV heads cannot be replicated over tensor parallel size {tp} "
                          "(vLLM 0.33.0 asserts tp_size % total_num_kv_heads == 0, llama.py:155)", config.file)
    return max(1, total_kv_heads // tp)


def pp_ranges(num_layers: int, pp: int) -> list[range]:
    """The layers of each pipeline rank: ``get_pp_indices`` (vllm/distributed/utils.py:198-241)
    without ``VLLM_PP_LAYER_PARTITION``: the remainder goes to the ranks before the last."""
    partitions = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        partitions[-i] += 1
    out, start = [], 0
    for size in partitions:
        out.append(range(start, start + size))
        start += size
    return out

"""The state of one Mamba-like layer on one tensor-parallel rank: ``MambaSpec`` shapes and dtypes as
vLLM 0.33.0's ``MambaStateShapeCalculator`` / ``MambaStateDtypeCalculator`` compute them
(vllm/model_executor/layers/mamba/mamba_utils.py), with the engine defaults a geometry from a
config assumes: ``mamba_cache_dtype`` / ``mamba_ssm_cache_dtype`` ``auto`` (unless the model's
config hook sets one), no speculative tokens, no ReplaySSM, the conv state laid out ``SD``
(``(state_len, dim)``, mamba_utils.py:28-46, without ``VLLM_SSM_CONV_STATE_LAYOUT``).

``MambaBase.get_kv_cache_spec`` (layers/mamba/abstract.py:72-91) fills ``block_size``,
``page_size_padded``, ``mamba_cache_mode`` and ``num_speculative_blocks`` from the engine
settings; a geometry leaves them to the planner.
"""

from __future__ import annotations

from .common import Layer, divide, frozen
from .hf import CONFIG_FIELD, CONFIG_PARALLEL, ConfigError, HFConfig

__all__ = ["mamba1_state", "extra_groups_for_head_shards", "mamba2_state", "mamba2_heads_state", "gated_delta_net_state",
           "state_dtypes", "mamba_layer"]


def mamba1_state(config: HFConfig, tp: int, *, intermediate_size: int, state_size: int, conv_kernel: int,
                 key: str):
    """``MambaStateShapeCalculator.mamba1_state_shape`` (mamba_utils.py:170-183): conv
    ``(conv_kernel - 1, intermediate_size / tp)``, temporal ``(intermediate_size / tp, state_size)``."""
    per_rank = divide(config, intermediate_size, tp, key)
    return [conv_kernel - 1, per_rank], [per_rank, state_size]


def extra_groups_for_head_shards(n_groups: int, tp: int) -> int:
    """Groups replicated to follow the head shards (mamba_utils.py:260-269)."""
    return 0 if n_groups % tp == 0 else tp - n_groups


def mamba2_state(config: HFConfig, tp: int, *, intermediate_size: int, n_groups: int, num_heads: int,
                 head_dim: int, state_size: int, conv_kernel: int, heads_key: str, groups_key: str):
    """``MambaStateShapeCalculator.mamba2_state_shape`` (mamba_utils.py:185-213) with the asserts of
    ``MambaMixer2.__init__`` (layers/mamba/mamba_mixer2.py:316-323): ``(conv, temporal)``."""
    if num_heads % tp != 0:
        raise ConfigError(CONFIG_PARALLEL, config.key_path(heads_key),
                          "Tensor parallel world size must divide num heads.", config.file)
    if n_groups % tp != 0 and n_groups != 1:
        raise ConfigError(CONFIG_PARALLEL, config.key_path(groups_key),
                          "If tensor parallel world size does not divide num_groups, then num_groups must equal 1.",
                          config.file)
    groups = n_groups + extra_groups_for_head_shards(n_groups, tp)
    conv_dim = intermediate_size + 2 * groups * state_size
    conv = [conv_kernel - 1, divide(config, conv_dim, tp, groups_key)]
    temporal = [num_heads // tp, head_dim, state_size]
    return conv, temporal



def mamba2_heads_state(config: HFConfig, tp: int, intermediate: int):
    """:func:`mamba2_state` of a config that names its Mamba-2 heads ``mamba_n_heads`` and
    ``mamba_d_head`` (Granite 4.0-H, Falcon-H1), with the checks vLLM's model config makes of them."""
    n_heads = config.int("mamba_n_heads", 128, minimum=1)
    if intermediate % n_heads != 0:
        raise ConfigError(CONFIG_FIELD, config.key_path("mamba_n_heads"),
                          "mamba_n_heads must divide mamba_expand * hidden_size", config.file)
    d_head = intermediate // n_heads if config.raw("mamba_d_head", "auto") == "auto" else config.int("mamba_d_head")
    if d_head * n_heads != intermediate:
        raise ConfigError(CONFIG_FIELD, config.key_path("mamba_d_head"),
                          "The dimensions for the Mamba head state do not match the model intermediate_size",
                          config.file)
    return mamba2_state(config, tp, intermediate_size=intermediate,
                        n_groups=config.int("mamba_n_groups", 1, minimum=1), num_heads=n_heads, head_dim=d_head,
                        state_size=config.int("mamba_d_state", 256, minimum=1),
                        conv_kernel=config.int("mamba_d_conv", 4, minimum=1),
                        heads_key="mamba_n_heads", groups_key="mamba_n_groups")

def gated_delta_net_state(config: HFConfig, tp: int, *, num_k_heads: int, num_v_heads: int, head_k_dim: int,
                          head_v_dim: int, conv_kernel: int):
    """``MambaStateShapeCalculator.gated_delta_net_state_shape`` (mamba_utils.py:271-293):
    conv ``(conv_kernel - 1, (2 * head_k_dim * num_k_heads + head_v_dim * num_v_heads) / tp)``,
    temporal ``(num_v_heads / tp, head_v_dim, head_k_dim)``."""
    conv_dim = head_k_dim * num_k_heads * 2 + head_v_dim * num_v_heads
    conv = [conv_kernel - 1, divide(config, conv_dim, tp, "linear_num_key_heads")]
    temporal = [divide(config, num_v_heads, tp, "linear_num_value_heads"), head_v_dim, head_k_dim]
    return conv, temporal


def state_dtypes(model_dtype: str, ssm_cache_dtype: str = "auto") -> list[str]:
    """``MambaStateDtypeCalculator._mamba_state_dtype`` (mamba_utils.py:97-110): the conv state in
    ``mamba_cache_dtype`` (``auto``: the model dtype), the temporal state in
    ``mamba_ssm_cache_dtype`` (``auto``: the conv state's)."""
    return [model_dtype, model_dtype if ssm_cache_dtype == "auto" else ssm_cache_dtype]


def mamba_layer(name: str, index: int, shapes, dtypes, mamba_type: str | None = None,
                decoder_index: int | None = None, **extra: object) -> Layer:
    """One ``MambaSpec`` layer; ``mamba_type`` None is the class default (MAMBA2)."""
    fields: dict[str, object] = {"shapes": [list(s) for s in shapes], "dtypes": list(dtypes)}
    if mamba_type is not None:
        fields["mamba_type"] = mamba_type
    fields.update(extra)
    return Layer(name, index, "MambaSpec", tuple((k, frozen(v)) for k, v in fields.items()), decoder_index)

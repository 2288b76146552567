"""ReplaySSM's replay rings: the x, dt and B history a Mamba2 layer keeps inside its state page.

vLLM 0.33.0 appends three ring tensors to a Mamba2 layer's (conv, ssm) state when
``cache_config.use_replayssm`` is set (``MambaMixer2.get_state_shape``/``get_state_dtype``,
model_executor/layers/mamba/mamba_mixer2.py:1120-1155; NemotronH's model-level shapes the same,
model_executor/models/nemotron_h.py:761-820): ``MambaStateShapeCalculator.append_replayssm_ring``
(model_executor/layers/mamba/mamba_utils.py:214-246) and ``MambaStateDtypeCalculator.append_replayssm_ring``
(mamba_utils.py:86-95). The rings are state tensors like the others, so they enter the page
(``MambaSpec.page_size_bytes`` sums every shape x dtype, v1/kv_cache_interface.py:1121-1129), the
hybrid alignment and the pool exactly as the conv and SSM states do. ReplaySSM also sets a
Mamba spec's separate speculative blocks to zero (``num_speculative_blocks = 0``,
model_executor/layers/mamba/abstract.py:84-90; ``EngineSettings.num_speculative_blocks``).

The ring length is written with :mod:`kvproof.logic` so the ST rules (a profile's
``mamba_cache.replay_ring``) and the simulator share it.
"""

from __future__ import annotations

from ...logic import If

__all__ = ["ring_length", "extra_groups_for_head_shards", "ring_shapes", "ring_dtypes"]


def ring_length(buffer_len, flashinfer, num_speculative_tokens):
    """``ring_buffer_len`` (mamba_utils.py:234-237): the logical window, plus ``1 + num_speculative_tokens``
    on FlashInfer ("FlashInfer keeps the live window and current verify window together").
    ``flashinfer`` is a bool or a z3 term."""
    return If(flashinfer, buffer_len + 1 + num_speculative_tokens, buffer_len)


def extra_groups_for_head_shards(ngroups: int, tp_size: int) -> int:
    """``MambaStateShapeCalculator.extra_groups_for_head_shards`` (mamba_utils.py:261-270)."""
    if ngroups % tp_size == 0:
        return 0
    return tp_size - ngroups


def ring_shapes(ssm_shape: tuple[int, ...], n_groups: int, tp_size: int, length: int) -> tuple[tuple[int, ...], ...]:
    """The x, dt and B ring shapes appended to ``(conv, ssm)``; ``ssm_shape`` is
    ``(nheads // tp, head_dim, state_size)`` (mamba_utils.py:238-246; ``divide`` asserts the groups
    split evenly, which the head-shard extension guarantees)."""
    local_nheads, head_dim, state_size = ssm_shape
    local_ngroups = (n_groups + extra_groups_for_head_shards(n_groups, tp_size)) // tp_size
    return ((local_nheads, length, head_dim), (local_nheads, length), (local_ngroups, length, state_size))


def ring_dtypes(model_dtype: str) -> tuple[str, str, str]:
    """``(x, dt, B)`` = ``(activation, float32, activation)``; the activation dtype is the model's
    (``get_kv_cache_torch_dtype("auto", model_dtype)``, mamba_utils.py:92-95)."""
    return (model_dtype, "float32", model_dtype)

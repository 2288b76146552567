"""Which single-type manager serves a KV cache spec: vLLM 0.33.0's ``get_manager_for_kv_cache_spec``
and its registry (``v1/core/single_type_kv_cache_manager.py:2600-2730``,
``v1/kv_cache_spec_registry.py:114-137``).

PYTEST_DONT_REWRITE: the port's bare asserts are vLLM's, so their text must not depend on pytest
(see ``managers.py``).

It imports both ``managers.py`` and ``mamba_manager.py`` (a subclass of the managers' base), so
neither of them imports the other back.
"""

from __future__ import annotations

from ..startup.specs import ChunkedLocalAttentionSpec, KVCacheSpec, SlidingWindowSpec, manager_class_name
from .mamba_manager import MambaManager
from .managers import (
    ChunkedLocalAttentionManager,
    CircularBufferManager,
    CrossAttentionManager,
    FullAttentionManager,
    RSWAManager,
    SingleTypeKVCacheManager,
    SinkFullAttentionManager,
    SlidingWindowManager,
)

__all__ = ["get_manager_class", "get_manager_for_kv_cache_spec"]


_MANAGER_CLASSES: dict[str, type[SingleTypeKVCacheManager]] = {
    cls.__name__: cls
    for cls in (
        FullAttentionManager, RSWAManager, SlidingWindowManager, CircularBufferManager,
        ChunkedLocalAttentionManager, CrossAttentionManager, SinkFullAttentionManager, MambaManager,
    )
}


def get_manager_class(kv_cache_spec: KVCacheSpec) -> type[SingleTypeKVCacheManager]:
    """``KVCacheSpecRegistry.get_manager_class`` (``v1/kv_cache_spec_registry.py:114-137``): the
    registry of ``register_all_kvcache_specs`` (2656-2730), walked along the spec's MRO (the table
    lives in ``specs._REGISTRY``)."""
    name = manager_class_name(kv_cache_spec)
    assert name is not None, f"No manager registered for KVCacheSpec {type(kv_cache_spec)}"
    return _MANAGER_CLASSES[name]


def get_manager_for_kv_cache_spec(
    kv_cache_spec: KVCacheSpec,
    max_in_flight_tokens: int,
    max_model_len: int,
    role: str | None = None,
    **kwargs,
) -> SingleTypeKVCacheManager:
    """``get_manager_for_kv_cache_spec`` (2600-2653): SWA and chunked-local managers get the
    recycling-aware admission cap ``spec.max_admission_blocks_per_request(max_in_flight_tokens,
    max_model_len)``. Group roles only select HiSparse managers (not modelled): ``role`` is ignored."""
    manager_class = get_manager_class(kv_cache_spec)
    if isinstance(kv_cache_spec, (SlidingWindowSpec, ChunkedLocalAttentionSpec)):
        kwargs["max_admission_blocks_per_request"] = kv_cache_spec.max_admission_blocks_per_request(
            max_in_flight_tokens, max_model_len
        )
    return manager_class(kv_cache_spec, **kwargs)

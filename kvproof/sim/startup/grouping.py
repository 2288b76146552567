"""KV cache grouping (B.1): ``get_kv_cache_groups`` in vLLM's decision order.

A port of ``vllm/v1/core/kv_cache_planning.py`` (0.33.0): HMA-off promotion (853-876, 744-816),
the uniform-spec and uniform-type single groups (1148-1156), packed grouping for block-outermost
layouts (914-1041, with ``_approximate_gcd`` 879-911), page unification (346-408), uniform-page
hybrid grouping with padding (416-556), the MLA+SWA full-allocation fallback (819-850) and the
hidden-state groups (1157-1198).  Grouping is concrete (gcd, lcm and bucket counts are not
symbolic); layer order is the dict order of the specs, as in vLLM.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Sequence

from ...formulas.dtypes import dtype_size
from ...logic import cdiv
from .layout import KVCacheLayout
from .refusals import VllmAssertionError, VllmNotImplementedError, VllmValueError
from .specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
    replace_as,
    uniform_type_base_spec,
    manager_class_name,
    vllm_class_repr,
)

__all__ = [
    "KVCacheGroupSpec", "GroupingResult", "get_kv_cache_groups", "get_global_kv_cache_groups",
    "is_kv_cache_spec_uniform", "unify_kv_cache_spec_page_size", "approximate_gcd",
    "promote_local_kv_cache_specs", "create_kv_cache_group_specs", "per_layer_spec",
]


@dataclass
class KVCacheGroupSpec:
    """``KVCacheGroupSpec`` (kv_cache_interface.py:1504-1522)."""

    layer_names: list[str]
    kv_cache_spec: KVCacheSpec
    is_eagle_group: bool = False


@dataclass
class GroupingResult:
    """The groups and how vLLM reached them (for the Plan and the text report)."""

    groups: list[KVCacheGroupSpec]
    path: str  # attention_free | uniform_spec | uniform_type | packed | uniform_page | full_allocation_fallback
    layer_specs: dict[str, KVCacheSpec]  # each layer's own spec as grouped (after promotion/unification)
    warnings: list[str] = field(default_factory=list)
    padding_slots: list[int] = field(default_factory=list)  # per group: layers short of the group size


def per_layer_spec(group: KVCacheGroupSpec, layer_name: str) -> KVCacheSpec:
    """``_get_per_layer_spec`` (kv_cache_planning.py:558-564)."""
    spec = group.kv_cache_spec
    if isinstance(spec, UniformTypeKVCacheSpecs):
        return spec.kv_cache_specs[layer_name]
    return spec


def create_kv_cache_group_specs(
    kv_cache_spec: dict[str, KVCacheSpec], grouped_layer_names: list[list[str]]
) -> list[KVCacheGroupSpec]:
    """kv_cache_planning.py:189-219: one group per name list, with the merged spec."""
    groups = []
    for names in grouped_layer_names:
        layer_specs = [kv_cache_spec[name] for name in names]
        groups.append(KVCacheGroupSpec(names, type(layer_specs[0]).merge(layer_specs)))
    return groups


def is_kv_cache_spec_uniform(kv_cache_spec: dict[str, KVCacheSpec]) -> bool:
    """kv_cache_planning.py:222-243: only an ``AssertionError`` of ``merge`` means "not uniform"."""
    if not kv_cache_spec:
        return True
    try:
        values = list(kv_cache_spec.values())
        type(values[0]).merge(values)
    except AssertionError:
        return False
    return True


def unify_kv_cache_spec_page_size(kv_cache_spec: dict[str, KVCacheSpec]) -> dict[str, KVCacheSpec]:
    """B.1a (kv_cache_planning.py:346-408)."""
    page_sizes = {spec.page_size_bytes for spec in kv_cache_spec.values()}
    if len(page_sizes) <= 1:
        return kv_cache_spec
    max_page = max(page_sizes)
    out: dict[str, KVCacheSpec] = {}
    for name, spec in kv_cache_spec.items():
        if spec.page_size_bytes == max_page:
            out[name] = spec
        elif isinstance(spec, MambaSpec):
            new_spec = replace(spec, page_size_padded=max_page)
            out[name] = new_spec
        else:
            page = spec.page_size_bytes
            if max_page % page == 0:
                new_spec = replace(spec, block_size=spec.block_size * (max_page // page))
            elif isinstance(spec, AttentionSpec) and not isinstance(spec, MLAAttentionSpec):
                new_spec = replace(spec, page_size_padded=max_page)
            else:
                raise VllmNotImplementedError(
                    f"Layer {name}: page size is not divisible by the "
                    "maximum page size and cannot be padded. Padding is only "
                    "supported for non-MLA attention layers.",
                    "v1/core/kv_cache_planning.py:401-405",
                )
            if new_spec.page_size_bytes != max_page:
                raise VllmAssertionError("", "v1/core/kv_cache_planning.py:406")
            out[name] = new_spec
    return out


def _uniform_page_size_groups(
    kv_cache_spec: dict[str, KVCacheSpec], warnings: list[str]
) -> tuple[list[KVCacheGroupSpec], list[int]]:
    """B.1b (kv_cache_planning.py:416-556)."""
    same_type_layers: dict[KVCacheSpec, list[str]] = defaultdict(list)
    for name, spec in kv_cache_spec.items():
        same_type_layers[spec].append(name)

    layer_buckets: list[list[str]] = []
    spec_buckets: list[list[KVCacheSpec]] = []
    for spec, names in same_type_layers.items():
        for bucket_names, bucket_specs in zip(layer_buckets, spec_buckets):
            try:
                type(bucket_specs[0]).merge([*bucket_specs, spec])
            except (AssertionError, ValueError):
                continue
            bucket_names.extend(names)
            bucket_specs.append(spec)
            break
        else:
            layer_buckets.append(list(names))
            spec_buckets.append([spec])

    min_num_layers = min(len(layers) for layers in layer_buckets)
    max_num_layers = max(len(layers) for layers in layer_buckets)
    group_size = min_num_layers
    if max_num_layers < min_num_layers * 1.5:
        group_size = max_num_layers
    grouped: list[list[str]] = []
    padding: list[int] = []
    for layers in layer_buckets:
        num_padding = group_size - len(layers) % group_size
        if num_padding != group_size:
            warnings.append(
                "Add %d padding layers, may waste at most %.2f%% KV cache memory"
                % (num_padding, num_padding / len(layers) * 100)
            )
        num_groups = cdiv(len(layers), group_size)
        for i in range(num_groups):
            grouped.append(layers[i::num_groups])
            padding.append(group_size - len(layers[i::num_groups]))
    return create_kv_cache_group_specs(kv_cache_spec, grouped), padding


def promote_local_kv_cache_specs(kv_cache_spec: dict[str, KVCacheSpec]) -> dict[str, KVCacheSpec]:
    """``_promote_local_kv_cache_specs`` (kv_cache_planning.py:744-816)."""
    promoted = dict(kv_cache_spec)
    if is_kv_cache_spec_uniform(promoted) or UniformTypeKVCacheSpecs.is_uniform_type(promoted):
        return promoted
    values = list(promoted.values())
    has_full = any(isinstance(s, FullAttentionSpec) for s in values)
    has_swa = any(isinstance(s, SlidingWindowSpec) for s in values)
    has_chunked = any(isinstance(s, ChunkedLocalAttentionSpec) for s in values)
    full_block_sizes = {s.block_size for s in values if isinstance(s, FullAttentionSpec)}
    full_block_size = next(iter(full_block_sizes)) if len(full_block_sizes) == 1 else None

    def promoted_page_size_padded(spec: AttentionSpec, block_size: int) -> int | None:
        if spec.page_size_padded is None:
            return None
        unpadded = spec.unpadded_page_size_bytes * block_size // spec.block_size
        return max(spec.page_size_padded, unpadded)

    promotions = {
        SlidingWindowMLASpec: MLAAttentionSpec,
        SlidingWindowSpec: FullAttentionSpec,
        ChunkedLocalAttentionSpec: FullAttentionSpec,
    }
    if has_full and (has_swa or has_chunked):
        for name, spec in kv_cache_spec.items():
            target = next((promotions[c] for c in type(spec).__mro__ if c in promotions), None)
            if target is None:
                continue
            block_size = full_block_size or spec.block_size
            promoted[name] = replace_as(
                spec,
                target,
                drop=("extra_retained_tokens",),
                block_size=block_size,
                page_size_padded=promoted_page_size_padded(spec, block_size),
            )
    if not (is_kv_cache_spec_uniform(promoted) or UniformTypeKVCacheSpecs.is_uniform_type(promoted)):
        raise VllmValueError(
            "Failed to promote local KV cache specs to one unified type.", "v1/core/kv_cache_planning.py:810-814"
        )
    return promoted


def _full_allocation_fallback(
    kv_cache_spec: dict[str, KVCacheSpec], warnings: list[str]
) -> list[KVCacheGroupSpec] | None:
    """``_try_get_full_allocation_fallback_groups`` (kv_cache_planning.py:819-850)."""
    values = list(kv_cache_spec.values())
    if any(isinstance(s, HiddenStateCacheSpec) for s in values):
        return None
    if any(isinstance(s, (SlidingWindowMLASpec, ChunkedLocalAttentionSpec)) for s in values):
        return None
    has_mla = any(isinstance(s, MLAAttentionSpec) for s in values)
    has_swa = any(isinstance(s, SlidingWindowSpec) for s in values)
    if not (has_mla and has_swa):
        return None
    try:
        promoted = promote_local_kv_cache_specs(kv_cache_spec)
    except ValueError:
        return None
    uniform = UniformTypeKVCacheSpecs.from_specs(promoted)
    if uniform is None:
        return None
    warnings.append(
        "KV cache page sizes cannot be unified; treating sliding-window layers as full attention for "
        "cache allocation. Sliding-window attention compute is unchanged."
    )
    return [KVCacheGroupSpec(list(uniform.kv_cache_specs), uniform)]


def unify_hybrid_kv_cache_specs(kv_cache_spec: dict[str, KVCacheSpec], warnings: list[str]) -> None:
    """B.1 step 1 (kv_cache_planning.py:853-876): in place, per {replicated attention, rest}."""
    parts: dict[bool, dict[str, KVCacheSpec]] = defaultdict(dict)
    for name, spec in kv_cache_spec.items():
        replicated = isinstance(spec, AttentionSpec) and not spec.dcp_sharded
        parts[replicated][name] = spec
    for specs in parts.values():
        promoted = promote_local_kv_cache_specs(specs)
        if promoted == specs:
            continue
        warnings.append(
            "Hybrid KV cache manager is disabled for this hybrid model, This means we do not enable any "
            "optimizations for saving KV cache memory (e.g., dropping the KV cache outside the sliding "
            "window). The compute of layers like sliding window is still saved."
        )
        kv_cache_spec.update(promoted)


def approximate_gcd(values: Sequence[int], *, lower_bound: int | None = None) -> int:
    """``_approximate_gcd`` (kv_cache_planning.py:879-911): the chunk size with the least
    total upward padding, ties to the larger."""
    if not values:
        raise VllmValueError("values must be non-empty")
    if any(x <= 0 for x in values):
        raise VllmValueError(f"values must be positive, got: {list(values)!r}")
    min_d = max(1, lower_bound if lower_bound is not None else 1)
    max_d = max(values)
    if min_d > max_d:
        return min_d
    best_d, best_pad = min_d, None
    for d in range(min_d, max_d + 1):
        pad = sum((d - (x % d)) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best_d):
            best_pad, best_d = pad, d
    return best_d


def _packed_groups(layout: KVCacheLayout, kv_cache_spec: dict[str, KVCacheSpec]) -> list[KVCacheGroupSpec] | None:
    """B.1c ``_get_packed_kv_cache_groups`` (kv_cache_planning.py:914-1041)."""
    page_sizes = {spec.page_size_bytes for spec in kv_cache_spec.values()}
    if not layout.is_block_outermost or len(page_sizes) <= 1:
        return None

    buckets: list[dict[str, KVCacheSpec]] = []
    for name, spec in kv_cache_spec.items():
        for bucket in buckets:
            if UniformTypeKVCacheSpecs.is_uniform_type({**bucket, name: spec}):
                bucket[name] = spec
                break
        else:
            buckets.append({name: spec})

    bucketed = []
    for bucket in buckets:
        uniform = UniformTypeKVCacheSpecs.from_specs(bucket)
        if uniform is None:
            raise VllmAssertionError("", "v1/core/kv_cache_planning.py:947")
        page_size_layers: dict[int, list[str]] = defaultdict(list)
        for name, spec in bucket.items():
            page_size_layers[spec.page_size_bytes].append(name)
        balanced = len(set(map(len, page_size_layers.values()))) == 1
        bucketed.append((uniform, page_size_layers, balanced))

    min_repeats = max(
        (spec.get_max_layers_per_page_size() for spec, psl, balanced in bucketed if balanced and len(psl) > 1),
        default=0,
    )
    repeats = (
        approximate_gcd(
            [spec.get_max_layers_per_page_size() for spec, _, balanced in bucketed if balanced],
            lower_bound=min_repeats,
        )
        if min_repeats
        else None
    )

    def num_groups_for(spec: UniformTypeKVCacheSpecs, balanced: bool) -> int:
        if balanced and repeats is not None:
            return cdiv(spec.get_max_layers_per_page_size(), repeats)
        return 1

    def widest_group_bytes(psl: dict[int, list[str]], n: int) -> int:
        return sum(cdiv(len(names), n) * page for page, names in psl.items())

    def is_state_bucket(spec: UniformTypeKVCacheSpecs) -> bool:
        if isinstance(spec.first_spec, (MambaSpec, CircularBufferSpec)):
            return True
        return repeats is None and isinstance(spec.first_spec, SlidingWindowSpec)

    anchor_bytes = max(
        (
            widest_group_bytes(psl, len(spec.kv_cache_specs) if is_state_bucket(spec) else num_groups_for(spec, balanced))
            for spec, psl, balanced in bucketed
        ),
        default=0,
    )

    groups: list[KVCacheGroupSpec] = []
    for spec, psl, balanced in bucketed:
        num_groups = num_groups_for(spec, balanced)
        if anchor_bytes and is_state_bucket(spec):
            states_per_block = max(anchor_bytes // spec.first_spec.page_size_bytes, 1)
            num_groups = max(num_groups, cdiv(len(spec.kv_cache_specs), states_per_block))
        if num_groups == 1:
            groups.append(KVCacheGroupSpec(list(spec.kv_cache_specs), spec))
            continue
        pattern_repeats = list(zip(*psl.values()))
        for i in range(num_groups):
            names = [name for repeat in pattern_repeats[i::num_groups] for name in repeat]
            group_spec = UniformTypeKVCacheSpecs.from_specs({name: spec.kv_cache_specs[name] for name in names})
            if group_spec is None:
                raise VllmAssertionError("", "v1/core/kv_cache_planning.py:1037")
            groups.append(KVCacheGroupSpec(names, group_spec))
    return groups


def _largest_divisor_at_most(value: int, limit: int) -> int:
    for candidate in range(min(value, limit), 0, -1):
        if value % candidate == 0:
            return candidate
    return 1


def _hidden_per_token(spec: HiddenStateCacheSpec) -> int:
    return spec.num_kv_heads * spec.head_size * dtype_size(spec.dtype)


def _ensure_min_page_size(
    groups: list[KVCacheGroupSpec], common_page: int, hidden_specs: dict[str, HiddenStateCacheSpec]
) -> tuple[list[KVCacheGroupSpec], int]:
    """kv_cache_planning.py:1081-1110."""
    max_per_token = max(_hidden_per_token(spec) for spec in hidden_specs.values())
    if max_per_token <= common_page:
        return groups, common_page
    scale = cdiv(max_per_token, common_page)
    common_page *= scale
    scaled = []
    for group in groups:
        spec = group.kv_cache_spec
        changes: dict = {"block_size": spec.block_size * scale}
        if isinstance(spec, (AttentionSpec, MambaSpec)) and spec.page_size_padded is not None:
            changes["page_size_padded"] = spec.page_size_padded * scale
        scaled.append(KVCacheGroupSpec(group.layer_names, replace(spec, **changes)))
    return scaled, common_page


def get_kv_cache_groups(
    kv_cache_spec: dict[str, KVCacheSpec],
    layout: KVCacheLayout,
    disable_hybrid_kv_cache_manager: bool = False,
) -> GroupingResult:
    """B.1 ``get_kv_cache_groups`` (kv_cache_planning.py:1113-1200).  ``kv_cache_spec`` is
    updated in place like vLLM's (HMA-off promotion)."""
    warnings: list[str] = []
    if disable_hybrid_kv_cache_manager:
        unify_hybrid_kv_cache_specs(kv_cache_spec, warnings)
    if not kv_cache_spec:
        return GroupingResult([], "attention_free", {}, warnings)
    if is_kv_cache_spec_uniform(kv_cache_spec):
        groups = create_kv_cache_group_specs(kv_cache_spec, [list(kv_cache_spec)])
        return GroupingResult(groups, "uniform_spec", dict(kv_cache_spec), warnings, [0])
    uniform = UniformTypeKVCacheSpecs.from_specs(kv_cache_spec)
    if uniform is not None:
        return GroupingResult([KVCacheGroupSpec(list(uniform.kv_cache_specs), uniform)], "uniform_type",
                              dict(kv_cache_spec), warnings, [0])
    hidden_specs = {k: v for k, v in kv_cache_spec.items() if isinstance(v, HiddenStateCacheSpec)}
    filtered = {k: v for k, v in kv_cache_spec.items() if not isinstance(v, HiddenStateCacheSpec)}

    packed = _packed_groups(layout, filtered)
    if packed:
        packed += [KVCacheGroupSpec([name], spec) for name, spec in hidden_specs.items()]
        return GroupingResult(packed, "packed", _specs_of_groups(packed, kv_cache_spec), warnings,
                              _packed_padding(packed))

    try:
        filtered = unify_kv_cache_spec_page_size(filtered)
    except NotImplementedError:
        fallback = _full_allocation_fallback(kv_cache_spec, warnings)
        if fallback is None:
            raise
        return GroupingResult(fallback, "full_allocation_fallback", _specs_of_groups(fallback, kv_cache_spec),
                              warnings, [0])
    groups, padding = _uniform_page_size_groups(filtered, warnings)
    if hidden_specs:
        pages = {g.kv_cache_spec.page_size_bytes for g in groups}
        if len(pages) != 1:
            raise VllmAssertionError("", "v1/core/kv_cache_planning.py:324")
        common_page = pages.pop()
        groups, common_page = _ensure_min_page_size(groups, common_page, hidden_specs)
        group_block_size = math.gcd(*(g.kv_cache_spec.block_size for g in groups))
        for name, spec in hidden_specs.items():
            per_token = _hidden_per_token(spec)
            new_bs = _largest_divisor_at_most(group_block_size, max(common_page // per_token, 1))
            groups.append(KVCacheGroupSpec([name], replace(spec, block_size=new_bs, page_size_padded=common_page)))
            padding.append(0)
    layer_specs = dict(filtered)
    for group in groups[len(groups) - len(hidden_specs):] if hidden_specs else []:
        layer_specs[group.layer_names[0]] = group.kv_cache_spec
    return GroupingResult(groups, "uniform_page", _in_order(layer_specs, kv_cache_spec), warnings, padding)


def _in_order(layer_specs: dict[str, KVCacheSpec], order: dict[str, KVCacheSpec]) -> dict[str, KVCacheSpec]:
    return {name: layer_specs[name] for name in order}


def _specs_of_groups(groups: list[KVCacheGroupSpec], order: dict[str, KVCacheSpec]) -> dict[str, KVCacheSpec]:
    out = {}
    for group in groups:
        for name in group.layer_names:
            out[name] = per_layer_spec(group, name)
    return _in_order(out, order)


def _packed_padding(groups: list[KVCacheGroupSpec]) -> list[int]:
    """Layers short of the widest group of the same bucket (informational)."""
    return [0 for _ in groups]


def check_exact_partition(groups: list[KVCacheGroupSpec], kv_cache_spec: dict[str, KVCacheSpec]) -> None:
    """``_check_exact_partition`` (kv_cache_planning.py:1218-1230)."""
    grouped: set[str] = set()
    for group in groups:
        overlap = set(group.layer_names) & grouped
        if overlap:
            raise VllmAssertionError(f"KV cache group overlaps: {overlap}.")
        grouped |= set(group.layer_names)
    missing = set(kv_cache_spec) - grouped
    if missing:
        raise VllmAssertionError(f"KV cache groups miss layers: {sorted(missing)}.")


def check_kv_cache_spec_registry(kv_cache_spec: dict[str, KVCacheSpec]) -> None:
    """``KVCacheSpecRegistry.check_kv_cache_spec_registry`` (v1/kv_cache_spec_registry.py:164-184)."""
    for name, spec in kv_cache_spec.items():
        if uniform_type_base_spec(spec) is None:
            raise VllmValueError(
                f"Unsupported KV cache spec type for layer {name}: {vllm_class_repr(spec)}. "
                "Please register it using @register_kv_cache_spec decorator.",
                "v1/kv_cache_spec_registry.py:170-177",
            )
        if manager_class_name(spec) is None:  # pragma: no cover - every registered type has one
            raise VllmValueError(f"No manager found for KV cache spec type for layer {name}")


def get_global_kv_cache_groups(
    worker_specs: list[dict[str, KVCacheSpec]],
    layout: KVCacheLayout,
    *,
    disable_hybrid_kv_cache_manager: bool,
    num_prefill_lookahead_tokens: int,
    use_eagle_block_drop: bool,
) -> GroupingResult:
    """``get_global_kv_cache_groups`` (kv_cache_planning.py:1607-1657): merge the workers'
    specs, check the registry, set ``extra_retained_tokens`` on every SWA spec, group, check
    the partition and flag EAGLE groups."""
    merged: dict[str, KVCacheSpec] = {}
    for specs in worker_specs:
        for name, spec in specs.items():
            if name not in merged:
                merged[name] = spec
            elif merged[name] != spec:
                raise VllmAssertionError(
                    "The KV cache specs for the same layer are different across workers. This is not supported yet."
                )
    check_kv_cache_spec_registry(merged)
    extra = max(0, num_prefill_lookahead_tokens - 1)
    for name, spec in merged.items():
        if isinstance(spec, SlidingWindowSpec):
            merged[name] = replace(spec, extra_retained_tokens=extra)
    draft_names = {name for name, spec in merged.items() if spec.is_draft}
    result = get_kv_cache_groups(merged, layout, disable_hybrid_kv_cache_manager)
    check_exact_partition(result.groups, merged)
    if use_eagle_block_drop:
        for group in result.groups:
            group.is_eagle_group = not draft_names.isdisjoint(group.layer_names)
    return result

"""Geometries from Hugging Face ``config.json`` files (``kvproof geometry CONFIG``).

One module per architecture family maps a config to the KV cache spec every layer of vLLM
0.33.0's model reports on one tensor-parallel rank; :data:`ARCHITECTURES` is the table. An
architecture outside it is refused with the list of the supported ones, never guessed.
See docs/geometry-from-config.md.
"""

from __future__ import annotations

from typing import Any

from . import (bamba, deepseek, dense, falcon_h1, gemma, gpt_oss, granite, jamba, kimi_linear, llama4, nemotron_h,
               qwen3_next)
from .common import Layer, Model, Parallel, derived_max_model_len, plain, pp_ranges
from .hf import CONFIG_ARCH, CONFIG_PARALLEL, ConfigError, HFConfig

__all__ = ["ARCHITECTURES", "REFUSED_BY_VLLM", "geometry_from_config", "ConfigError", "HFConfig"]

ARCHITECTURES = {
    **dense.ARCHITECTURES, **deepseek.ARCHITECTURES, **falcon_h1.ARCHITECTURES, **gemma.ARCHITECTURES,
    **gpt_oss.ARCHITECTURES, **granite.ARCHITECTURES, **jamba.ARCHITECTURES, **kimi_linear.ARCHITECTURES,
    **llama4.ARCHITECTURES,
    **nemotron_h.ARCHITECTURES, **qwen3_next.ARCHITECTURES,
}
#: Architectures vLLM 0.33.0 itself refuses to build: their module gives vLLM's refusal.
REFUSED_BY_VLLM = {**bamba.ARCHITECTURES}


def _architecture(config: HFConfig):
    arch = config.architecture()
    if arch in REFUSED_BY_VLLM:
        return arch, REFUSED_BY_VLLM[arch]
    if arch not in ARCHITECTURES:
        raise ConfigError(CONFIG_ARCH, "$.architectures[0]",
                          f"architecture {arch!r} is not in kvproof's table; supported: "
                          f"{', '.join(sorted(ARCHITECTURES))}", config.file)
    return arch, ARCHITECTURES[arch]


def _entries(layers: list[Layer]) -> list[dict[str, Any]]:
    """The layers as few entries as ``range`` allows: each run of layers of one name pattern and spec
    whose indices step evenly is one entry (``[start, stop, step]``, e.g. every other layer of
    gpt-oss), runs taken greedily in index order. The geometry orders layers by index
    (``layer_order`` ``by_index``), so the entries' order does not change the plan."""
    groups: dict[tuple, list[Layer]] = {}
    for layer in layers:
        groups.setdefault((layer.name, layer.spec, layer.fields), []).append(layer)
    entries: list[dict[str, Any]] = []

    def entry(run: list[Layer]) -> dict[str, Any]:
        first = run[0]
        out: dict[str, Any] = {"name": first.name}
        if len(run) == 1:
            out["index"] = first.index
        else:
            step = run[1].index - first.index
            out["range"] = [first.index, run[-1].index + 1] + ([step] if step > 1 else [])
        out["spec"] = first.spec
        out.update({key: plain(value) for key, value in first.fields})
        return out

    for group in groups.values():
        run: list[Layer] = []
        for layer in group:
            if len(run) >= 2 and layer.index - run[-1].index != run[1].index - run[0].index:
                entries.append(entry(run))
                run = []
            run.append(layer)
        entries.append(entry(run))
    return entries


def geometry_from_config(tree: Any, tp: int = 1, pp: int = 1, settings: dict[str, Any] | None = None,
                         file: str | None = None, name: str | None = None) -> dict[str, Any]:
    """The geometry document (a JSON tree) of ``tree`` at tensor-parallel size ``tp`` and
    pipeline-parallel size ``pp``; ``settings`` are top-level geometry fields that replace the
    derived ones. Raises :class:`ConfigError` for a config vLLM cannot build or kvproof does not
    map."""
    config = HFConfig(tree, file)
    arch, layers_of = _architecture(config)
    settings = settings or {}
    # MambaModelConfig.verify_and_update_config (model_executor/models/config.py:763-787, as the
    # planner applies it): align iff prefix caching is on, whatever mamba_cache_mode says.
    mode = "none" if settings.get("enable_prefix_caching", True) is False else "align"
    model = layers_of(config, Parallel(tp, pp, mode))
    model = model if isinstance(model, Model) else Model(model)
    layers = model.layers
    text = config.text()  # vLLM's hf_text_config: the layers and the derived length are its
    num_layers = text.int("num_hidden_layers", minimum=1)
    if pp > num_layers:
        raise ConfigError(CONFIG_PARALLEL, text.key_path("num_hidden_layers"),
                          f"pipeline parallel size {pp} exceeds the {num_layers} layers", file)
    geometry: dict[str, Any] = {
        "name": f"{name or arch} at TP {tp}" + (f", PP {pp}" if pp > 1 else "") + " (kvproof geometry)",
        "layers": _entries(layers),
        "max_model_len": derived_max_model_len(text),
    }
    if [layer.index for layer in layers] != sorted(layer.index for layer in layers):
        # vLLM registers these layers out of index order (Falcon-H1's Mamba branch), and the order
        # drives its grouping: one entry per layer, as listed.
        geometry["layers"] = [_entries([layer])[0] for layer in layers]
        geometry["layer_order"] = "as_listed"
    if tp > 1:
        geometry["tp"] = tp
    if pp > 1:
        # Each rank's layers in the model's registration order (the order of ``layers``).
        geometry["workers"] = [[layer.name.replace("{i}", str(layer.index)) for layer in layers
                                if layer.rank_index in span] for span in pp_ranges(num_layers, pp)]
    geometry.update(model.settings)
    geometry.update(settings)
    return model.complete(geometry) if model.complete is not None else geometry

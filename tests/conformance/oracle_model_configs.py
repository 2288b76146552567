#!/usr/bin/env python3
"""Conformance oracle for ``kvproof geometry``: the KV cache spec of every layer as vLLM 0.33.0's own
model code reports it for a Hugging Face config folder at a TP/PP size.

    .venv-vllm/bin/python tests/conformance/oracle_model_configs.py --jsonl
    # {"config_dir", "tp", "pp"[, "enable_prefix_caching"][, "kvproof_geometry"]} per line

For each request it builds ``ModelConfig`` from the folder offline (``HF_HUB_OFFLINE=1``) and
``VllmConfig`` with that parallel config, then, per pipeline rank, the model class vLLM resolves
(``get_model_architecture``) on the ``meta`` device (no weights, no memory), and asks every
``AttentionLayerBase`` of the static forward context for ``get_kv_cache_spec`` as
``GPUModelRunner.get_kv_cache_spec`` does (v1/worker/gpu_model_runner.py:7081-7118, without the
backend's ``customize_attention_spec``, which the planner's default platform applies).

Stand-ins (docs/geometry-from-config.md "Conformance"):
* one process plays every rank: the tensor- and pipeline-parallel groups are vLLM's own
  ``GroupCoordinator`` of a 1-process gloo world whose ``world_size`` / rank fields are set to the
  requested sizes, which is all that layer construction reads;
* the model registry inspects classes in this process (``_run_in_subprocess`` runs the function
  here; the subprocess exists only to keep CUDA out of the parent);
* ``compressed_tensors`` and ``torchvision`` (a pinned vLLM dependency and Llama 4's image
  processor import, both absent from the CPU venv) are modules whose every name is a placeholder
  class: only quantized checkpoints and image preprocessing use them, never a layer's cache;
* weight quantization (``quantization_config``: gpt-oss's MXFP4, DeepSeek's FP8 blocks) has no
  CPU kernel, so the config is read without it (``hf_overrides``). A layer's cache spec reads the
  cache dtype (``cache_config.cache_dtype``, ``auto``), never the weights' quantization;
* the CPU platform's GPU-only refusals and state-dtype resets are neutralised where a GPU answers
  otherwise: ``CpuPlatform.check_and_update_config`` resets ``mamba_ssm_cache_dtype`` to float32
  when the CPU has AVX-512 BF16 (platforms/cpu.py:318-334), which no GPU does (the check is run
  with ``torch.cpu._is_avx512_bf16_supported`` answering False); ``FusedMoEConfig`` refuses a
  non-gated MoE activation (Nemotron-H's ``relu2``) off CUDA/ROCm/XPU
  (layers/fused_moe/config.py:1410-1415), so that module sees a CUDA-alike platform, and a MoE
  configuration no CPU expert kernel supports takes the portable one. MoE layers hold no cache.

Output per request: ``{"status": "ok", "max_model_len", "dtype", "ranks": [{layer: {"spec",
"fields", "defaults"}}]}`` or ``{"status": "refused", "error": {"type", "message"}}``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import tempfile
import traceback
import types

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["VLLM_LOGGING_STREAM"] = "ext://sys.stderr"
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


class _Placeholder(type):
    def __getattr__(cls, name):
        return _Placeholder(f"{cls.__name__}.{name}", (), {})


class _PlaceholderModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _Placeholder(name, (), {})
        setattr(self, name, value)
        return value


class _PlaceholderPackages(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, names):
        self.names = names

    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in self.names:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _PlaceholderModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


if importlib.util.find_spec("compressed_tensors") is None:
    sys.meta_path.insert(0, _PlaceholderPackages({"compressed_tensors"}))

_REAL_STDOUT = sys.stdout
with contextlib.redirect_stdout(sys.stderr):
    import torch

    import vllm.model_executor.models.registry as registry
    from vllm.config import CacheConfig, ModelConfig, ParallelConfig, VllmConfig
    from vllm.config.vllm import set_current_vllm_config
    from vllm.distributed import parallel_state
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.model_executor.model_loader.utils import get_model_architecture
    from vllm.v1.attention.backend import MultipleOf

registry._run_in_subprocess = lambda fn: fn()
# After transformers has found torchvision absent (its image processors then take their PIL path),
# so that only the unconditional ``import torchvision`` of Llama 4's image processor meets the
# placeholder.
if importlib.util.find_spec("torchvision") is None:
    sys.meta_path.insert(0, _PlaceholderPackages({"torchvision"}))


class _CudaAlike:
    """``current_platform`` as fused_moe/config.py sees it: CUDA-alike (the default platform)."""

    def __init__(self, platform):
        self._platform = platform

    def __getattr__(self, name):
        return getattr(self._platform, name)

    def is_cuda_alike(self):
        return True


with contextlib.redirect_stdout(sys.stderr):
    import vllm.model_executor.layers.fused_moe.config as _fused_moe_config
_fused_moe_config.current_platform = _CudaAlike(_fused_moe_config.current_platform)


def _any_cpu_moe_kernel(select):
    """The CPU MoE kernels cover fewer shapes and activations than the GPU's
    (layers/fused_moe/oracle/unquantized.py:222-372); the expert kernel holds no cache, so a
    configuration they refuse takes the portable CPU kernel class."""

    def choose(moe_config):
        try:
            return select(moe_config)
        except NotImplementedError:
            from vllm.model_executor.layers.fused_moe.experts.cpu_moe import CPUUnquantizedExperts
            from vllm.model_executor.layers.fused_moe.oracle.unquantized import UnquantizedMoeBackend

            return UnquantizedMoeBackend.CPU, CPUUnquantizedExperts

    return choose


with contextlib.redirect_stdout(sys.stderr):
    import vllm.model_executor.layers.fused_moe.unquantized_fused_moe_method as _unquantized_moe
_unquantized_moe.select_unquantized_moe_backend = _any_cpu_moe_kernel(_unquantized_moe.select_unquantized_moe_backend)


@contextlib.contextmanager
def _gpu_state_dtypes():
    """No AVX-512 BF16 while the platform checks the config (platforms/cpu.py:318-334)."""
    saved = torch.cpu._is_avx512_bf16_supported
    torch.cpu._is_avx512_bf16_supported = lambda: False
    try:
        yield
    finally:
        torch.cpu._is_avx512_bf16_supported = saved

_WORLD_READY = False


def _world() -> None:
    global _WORLD_READY
    if _WORLD_READY:
        return
    parallel_state.init_distributed_environment(
        world_size=1, rank=0, local_rank=0, backend="gloo",
        distributed_init_method=f"file://{tempfile.mkdtemp()}/init")
    _WORLD_READY = True


def _json(value):
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, MultipleOf):
        return {"MultipleOf": value.base}
    if isinstance(value, (tuple, list)):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _defaults(cls) -> dict:
    out = {}
    for field in dataclasses.fields(cls):
        if field.default is not dataclasses.MISSING:
            out[field.name] = _json(field.default)
        elif field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            out[field.name] = _json(field.default_factory())  # type: ignore[misc]
    return out


def _spec_objects(vllm_config) -> dict:
    """``GPUModelRunner.get_kv_cache_spec`` (gpu_model_runner.py:7092-7116) without the backend's
    customisation: KV-sharing layers and layers without a cache are skipped, draft layers marked."""
    out = {}
    for name, layer in vllm_config.compilation_config.static_forward_context.items():
        if not isinstance(layer, AttentionLayerBase):
            continue
        if getattr(layer, "kv_sharing_target_layer_name", None):
            continue
        spec = layer.get_kv_cache_spec(vllm_config)
        if spec is None:
            continue
        if getattr(layer, "is_draft_layer", False):
            spec = dataclasses.replace(spec, is_draft=True)
        out[name] = spec
    return out


def _specs(vllm_config) -> dict:
    out = {}
    for name, spec in _spec_objects(vllm_config).items():
        fields = {f.name: _json(getattr(spec, f.name)) for f in dataclasses.fields(spec)}
        out[name] = {"spec": type(spec).__name__, "fields": fields, "defaults": _defaults(type(spec))}
    return out


ENGINE_FIELDS = ("block_size", "mamba_cache_mode", "num_speculative_blocks", "page_size_padded")


def compare(kvproof_geometry: dict, vllm_specs: dict) -> list[dict]:
    """Every layer of kvproof's geometry built as vLLM's spec dataclass (through the planning
    oracle's own geometry parser, oracle.py ``parse_geometry``) against the spec vLLM's model
    reports, compared with the dataclass's ``==``; the fields the engine settings fill (the geometry
    leaves them to the planner: ``block_size``, and a ``MambaSpec``'s ``mamba_cache_mode``,
    ``num_speculative_blocks`` and ``page_size_padded``) take vLLM's values on both sides."""
    import oracle  # tests/conformance/oracle.py: same vLLM, same process set-up

    layers = {l["name"]: l for l in oracle.parse_geometry(kvproof_geometry)["layers"]}
    out = []
    for name in sorted(set(layers) | set(vllm_specs)):
        if name not in layers or name not in vllm_specs:
            out.append({"layer": name, "vllm": repr(vllm_specs.get(name)), "kvproof": "<missing>" if name not in layers
                        else layers[name]["cls"].__name__})
            continue
        reported = vllm_specs[name]
        fields = dict(layers[name]["fields"])
        engine = ENGINE_FIELDS if type(reported).__name__ == "MambaSpec" else ("block_size",)
        for field in engine:
            fields.setdefault(field, getattr(reported, field))
        try:
            built = layers[name]["cls"](**fields)
        except Exception as exc:  # noqa: BLE001 - a spec vLLM cannot build is a difference
            out.append({"layer": name, "vllm": repr(reported), "kvproof": f"{type(exc).__name__}: {exc}"})
            continue
        if built != reported:
            diff = {f.name: [_json(getattr(reported, f.name)), _json(getattr(built, f.name, None))]
                    for f in dataclasses.fields(reported) if getattr(reported, f.name) != getattr(built, f.name, None)}
            out.append({"layer": name, "vllm_spec": type(reported).__name__, "kvproof_spec": type(built).__name__,
                        "fields": diff})
    return out


def model_specs(request: dict) -> dict:
    folder, tp, pp = request["config_dir"], int(request.get("tp", 1)), int(request.get("pp", 1))
    cache = {key: request[key] for key in ("enable_prefix_caching",) if key in request}
    ranks, objects = [], {}
    for pp_rank in range(pp):
        # A fresh ModelConfig per rank: building a VllmConfig updates it in place (for a hybrid
        # model the first one consumes the mamba block size set-up), as each rank's own engine does.
        model_config = ModelConfig(model=folder, tokenizer=folder, skip_tokenizer_init=True,
                                   hf_overrides={"quantization_config": None})
        with _gpu_state_dtypes():
            vllm_config = VllmConfig(model_config=model_config,
                                     parallel_config=ParallelConfig(tensor_parallel_size=tp, pipeline_parallel_size=pp),
                                     cache_config=CacheConfig(**cache))
        _world()
        with set_current_vllm_config(vllm_config):
            # Groups are made for the model at hand (the EP group exists only for MoE models).
            parallel_state.destroy_model_parallel()
            parallel_state.initialize_model_parallel(1, 1)
            tp_group, pp_group = parallel_state._TP, parallel_state._PP
            tp_group.world_size, tp_group.rank_in_group = tp, 0
            pp_group.world_size, pp_group.rank_in_group = pp, pp_rank
            pp_group.ranks = list(range(pp))
            pp_group.rank = pp_rank
            model_class, _ = get_model_architecture(vllm_config.model_config)
            with torch.device("meta"):
                model_class(vllm_config=vllm_config, prefix="")
            ranks.append(_specs(vllm_config))
            objects.update(_spec_objects(vllm_config))
    out = {"status": "ok", "max_model_len": model_config.max_model_len,
           "dtype": _json(model_config.dtype), "ranks": ranks}
    if "kvproof_geometry" in request:
        out["spec_differences"] = compare(request["kvproof_geometry"], objects)
    return out


def answer(request: dict) -> dict:
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return model_specs(request)
    except Exception as exc:  # noqa: BLE001 - vLLM's refusal is the answer
        traceback.print_exc(file=sys.stderr)
        cause = exc
        errors = getattr(exc, "errors", None)
        if callable(errors):  # pydantic wraps the config's ValueError
            inner = (errors() or [{}])[0].get("ctx", {}).get("error")
            cause = inner if isinstance(inner, BaseException) else exc
        return {"status": "refused", "error": {"type": type(cause).__name__, "message": str(cause)}}


def main() -> int:
    if sys.argv[1:] != ["--jsonl"]:
        print(__doc__, file=sys.stderr)
        return 2
    for line in sys.stdin:
        if line.strip():
            _REAL_STDOUT.write(json.dumps(answer(json.loads(line))) + "\n")
            _REAL_STDOUT.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Conformance oracle for ``kvproof geometry``: the KV cache spec of every layer as vLLM 0.33.0's own
model code reports it for a Hugging Face config folder at a TP/PP size.

    .venv-vllm/bin/python tests/conformance/oracle_model_configs.py --jsonl
    # {"config_dir", "tp", "pp"[, "enable_prefix_caching"][, "prefix_match_unit"][, "mamba_block_size"]
    #  [, "kvproof_geometry"]} per line

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
  configuration no CPU expert kernel supports takes the portable one. MoE layers hold no cache;
* the CPU platform turns prefix caching and chunked prefill off for every MLA model
  (platforms/cpu.py:533-547), which a GPU keeps (and a hybrid MLA model's Mamba block size then
  refuses, config/vllm.py:3441-3450): the request's values are kept;
* Kimi-Linear's model makes a CUDA stream to overlap GEMMs (models/kimi_k3/nvidia/model.py:981) and
  its GEMM-AR kernel flag (``VLLM_KIMI_K3_GEMM_AR``, on by default, envs.py:1669) imports cute_dsl:
  the stream is a placeholder object and the flag is off. Neither holds a cache.

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
os.environ.setdefault("VLLM_KIMI_K3_GEMM_AR", "0")


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
        if any(fullname == name or fullname.startswith(name + ".") for name in self.names):
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
# The CUDA extension modules a CPU build lacks, imported at module level by platforms/cuda.py
# (vllm._C_stable_libtorch) and by the sparse MLA backends (vllm.vllm_flash_attn): no layer
# construction calls into them.
sys.meta_path.insert(0, _PlaceholderPackages({"vllm._C_stable_libtorch", "vllm.vllm_flash_attn"}))

_REAL_STDOUT = sys.stdout
with contextlib.redirect_stdout(sys.stderr):
    import torch

    import vllm.model_executor.models.registry as registry
    from vllm.config import CacheConfig, ModelConfig, ParallelConfig, VllmConfig
    from vllm.config.vllm import set_current_vllm_config
    from vllm.distributed import parallel_state
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.model_executor.model_loader.utils import get_model_architecture
    from vllm.utils.torch_utils import set_default_torch_dtype
    from vllm.v1.attention.backend import MultipleOf

registry._run_in_subprocess = lambda fn: fn()

with contextlib.redirect_stdout(sys.stderr):
    import vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn as _qwen_gdn
    import vllm.platforms.cuda as _cuda
    import vllm.v1.attention.backends.fa_utils as _fa_utils
    from vllm.platforms.cpu import CpuPlatform
    from vllm.platforms.interface import DeviceCapability
    from vllm.v1.attention.backends.mla.indexer import DeepseekV32IndexerBackend
    from vllm.v1.kv_cache_interface import AttentionSpec
    from vllm.v1.worker.utils import customize_attention_spec

#: The default GPU platform the stand-ins answer as (kvproof's DEFAULT_PLATFORM, sim/startup/platform.py).
SM90 = DeviceCapability(9, 0)
_cpu_get_attn_backend_cls = CpuPlatform.get_attn_backend_cls.__func__


def _attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None):
    """A sparse MLA layer gets the backend vLLM selects on SM90 (``CudaPlatformBase.get_valid_backends``
    over ``_get_backend_priorities``, platforms/cuda.py:377-417, 139-154, and the lowest priority
    among the valid ones, 477-484): the CPU platform refuses sparse attention (platforms/cpu.py:154-155).
    FlashAttention 3's MLA support (``flash_attn_supports_mla``, fa_utils.py:325-345) is what SM90
    answers; backends whose kernels the CPU build lacks fail to import and count as invalid, as
    every non-sparse one is for a sparse layer anyway."""
    if not attn_selector_config.use_sparse:
        return _cpu_get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads)
    valid, invalid = _cuda.CudaPlatformBase.get_valid_backends(SM90, attn_selector_config, num_heads)
    if not valid:
        raise ValueError(f"no valid sparse attention backend on SM90: {invalid}")
    return _cuda._backend_cls_path(min(valid, key=lambda candidate: candidate.priority).backend_class)


CpuPlatform.get_attn_backend_cls = classmethod(_attn_backend_cls)
_fa_utils.flash_attn_supports_mla = lambda: True


def _sm90_gdn_prefill_backend(vllm_config):
    """``_resolve_gdn_prefill_backend`` on SM90 (qwen_gdn_linear_attn.py:236-260): FlashInfer for
    ``auto``, whose align-mode layers export prefill checkpoints (qwen_gdn_linear_attn.py:689-700)."""
    additional = vllm_config.additional_config
    backend = str(additional.get("gdn_prefill_backend", "auto") if isinstance(additional, dict) else "auto")
    backend = backend.strip().lower()
    return backend, "flashinfer" if backend in ("auto", "flashinfer") else "triton"


_qwen_gdn._resolve_gdn_prefill_backend = _sm90_gdn_prefill_backend

#: Model classes vLLM registers per platform: the CUDA one (vllm/models/deepseek_v32/__init__.py:17-21).
_CUDA_MODEL_CLASSES = {"DeepseekV32ForCausalLM": ("vllm.models.deepseek_v32.nvidia.model", "DeepseekV32ForCausalLM")}


def _gpu_backend(backend) -> bool:
    """A backend this process shares with the default GPU platform: the SM90 sparse MLA backend
    of the stand-in and the DeepSeek V3.2 indexer's, which no platform selects
    (``DeepseekV32IndexerCache.get_attn_backend``, model_executor/models/deepseek_v2.py:674-675)."""
    return backend.is_sparse() or issubclass(backend, DeepseekV32IndexerBackend)
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


class _StreamPlaceholder:
    """``torch.cuda.Stream`` where the CPU build has none: an object the layers keep, never use."""

    def __init__(self, *args, **kwargs):
        pass


if not torch.cuda.is_available():
    torch.cuda.Stream = _StreamPlaceholder
_cpu_check_and_update_config = CpuPlatform.check_and_update_config.__func__


def _gpu_prefix_caching(cls, vllm_config):
    """The CPU platform's checks without its MLA reset of prefix caching and chunked prefill
    (platforms/cpu.py:533-547), which the GPU does not make."""
    kept = vllm_config.cache_config.enable_prefix_caching, vllm_config.scheduler_config.enable_chunked_prefill
    _cpu_check_and_update_config(cls, vllm_config)
    vllm_config.cache_config.enable_prefix_caching, vllm_config.scheduler_config.enable_chunked_prefill = kept


CpuPlatform.check_and_update_config = classmethod(_gpu_prefix_caching)


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
    if isinstance(value, enum.Enum):  # as a geometry writes it: cache_role by value, the others by name
        return value.value if type(value).__name__ == "SparseCacheRole" else value.name
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
    """``GPUModelRunner.get_kv_cache_spec`` (gpu_model_runner.py:7092-7116): KV-sharing layers and
    layers without a cache are skipped, draft layers marked; the backend's customisation
    (``customize_attention_spec``) only where the backend is the GPU's (:func:`_gpu_backend`): the
    CPU backends' would not be the default platform's."""
    out = {}
    for name, layer in vllm_config.compilation_config.static_forward_context.items():
        if not isinstance(layer, AttentionLayerBase):
            continue
        if getattr(layer, "kv_sharing_target_layer_name", None):
            continue
        spec = layer.get_kv_cache_spec(vllm_config)
        if spec is None:
            continue
        if isinstance(spec, AttentionSpec) and _gpu_backend(layer.get_attn_backend()):
            spec = customize_attention_spec(layer.get_attn_backend(), spec)  # gpu_model_runner.py:7109-7113
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


def _platform(vllm_config) -> dict:
    """What the platform's block-size alignment reads from the built model: the non-SSM backends in
    vLLM's order (``_find_non_ssm_backends``, platforms/interface.py:680-697) with their kernel block
    sizes and whether they are the GPU's (:func:`_gpu_backend`), and the Mamba layers' prefill
    checkpoint alignment (``get_mamba_prefill_checkpoint_alignment``, layers/mamba/abstract.py:98-113)."""
    from vllm.model_executor.layers.mamba.abstract import get_mamba_prefill_checkpoint_alignment

    backends = [{"name": b.get_name(), "kernel_block_sizes": _json(b.get_supported_kernel_block_sizes()),
                 "gpu": _gpu_backend(b)} for b in CpuPlatform._find_non_ssm_backends(vllm_config)]
    return {"backends": backends, "mamba_prefill_checkpoint_alignment": get_mamba_prefill_checkpoint_alignment(vllm_config)}


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
    cache = {key: request[key] for key in ("enable_prefix_caching", "prefix_match_unit") if key in request}
    ranks, objects, platforms = [], {}, []
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
            if vllm_config.model_config.architecture in _CUDA_MODEL_CLASSES:
                module, name = _CUDA_MODEL_CLASSES[vllm_config.model_config.architecture]
                model_class = getattr(importlib.import_module(module), name)
            # As BaseModelLoader.load_model builds it (model_loader/base_loader.py:73-80), on meta.
            with set_default_torch_dtype(vllm_config.model_config.dtype), torch.device("meta"):
                model_class(vllm_config=vllm_config, prefix="")
            if "mamba_block_size" in request:
                # The block sizes Platform.update_block_size_for_backend settles after the model is
                # built (v1/executor/uniproc_executor.py:74-75), as the plan computed them: the
                # comparison of plans checks them against vLLM's planner.
                vllm_config.cache_config.mamba_block_size = request["mamba_block_size"]
            ranks.append(_specs(vllm_config))
            objects.update(_spec_objects(vllm_config))
            platforms.append(_platform(vllm_config))
    out = {"status": "ok", "max_model_len": model_config.max_model_len,
           "dtype": _json(model_config.dtype), "ranks": ranks, "platforms": platforms}
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

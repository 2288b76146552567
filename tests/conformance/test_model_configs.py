"""``kvproof geometry CONFIG`` against vLLM 0.33.0's own model code (oracle_model_configs.py), then
the whole plan: vLLM's planner (oracle.py) on the geometry made of vLLM's reported specs against
``kvproof.sim.simulate_document`` on kvproof's geometry. Real configs: tests/configs/*/config.json
(SOURCES.md names each one's origin)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from derive_configs import DERIVED
from oracle_process import HERE, ORACLE, ROOT, VENV_PYTHON, OracleProcess
from test_conformance import compare

from kvproof.configs import ARCHITECTURES, geometry_from_config
from kvproof.configs.hf import CONFIG_ARCH, CONFIG_PARALLEL, parse_config
from kvproof.diagnostics import InputError

CONFIGS = sorted(p.parent for p in (ROOT / "tests" / "configs").glob("*/config.json"))
SPEC_ORACLE = HERE / "oracle_model_configs.py"
MEMORY = 80 * 1024**3
#: Fields the engine settings fill (the geometry leaves them to the planner on both sides).
ENGINE_FIELDS = {"block_size", "mamba_cache_mode", "num_speculative_blocks"}


@pytest.fixture(scope="module")
def spec_oracle():
    proc = OracleProcess(VENV_PYTHON, SPEC_ORACLE, "model-configs-oracle.stderr.log")
    yield proc
    proc.close()


@pytest.fixture(scope="module")
def plan_oracle():
    proc = OracleProcess(VENV_PYTHON, ORACLE, "model-configs-plan-oracle.stderr.log")
    yield proc
    proc.close()


def _tree(folder: Path):
    return parse_config((folder / "config.json").read_bytes(), str(folder / "config.json"))


def _vllm_geometry(answer: dict, kvproof_geometry: dict) -> dict:
    """The geometry of vLLM's reported specs: each layer's fields that differ from its class's
    defaults, without the engine-filled ones; kvproof's top-level settings."""
    layers = []
    for rank in answer["ranks"]:
        for name, spec in rank.items():
            entry = {"name": name, "spec": spec["spec"]}
            for field, value in spec["fields"].items():
                if field not in ENGINE_FIELDS and spec["defaults"].get(field, object()) != value:
                    entry[field] = value
            layers.append(entry)
    out = {key: value for key, value in kvproof_geometry.items() if key not in ("layers", "workers", "name")}
    out["layers"] = layers
    out["layer_order"] = "as_listed"
    if len(answer["ranks"]) > 1:
        out["workers"] = [list(rank) for rank in answer["ranks"]]
    return out


def _listed_indices(geometry: dict) -> dict:
    """The same geometry with each ``range`` written as ``indices`` (the planning oracle's parser,
    oracle.py, reads two-element ranges only; kvproof plans the stepped form itself)."""
    layers = []
    for entry in geometry["layers"]:
        entry = dict(entry)
        if "range" in entry:
            entry["indices"] = list(range(*entry.pop("range")))
        layers.append(entry)
    return dict(geometry, layers=layers)


#: Architectures with Mamba-like layers, whose specs depend on the Mamba cache mode: they are also
#: run without prefix caching (mamba_cache_mode none).
MAMBA_LIKE = {"NemotronHForCausalLM", "Qwen3NextForCausalLM", "KimiLinearForCausalLM", "JambaForCausalLM",
              "GraniteMoeHybridForCausalLM", "FalconH1ForCausalLM"}
NO_PREFIX_CACHING = {"enable_prefix_caching": False}
#: GDN layers in align mode keep their checkpoints on lcm(prefix_match_unit, 64) when a prefix
#: match unit is set (get_mamba_prefill_checkpoint_grid, layers/mamba/abstract.py:116-129).
PREFIX_MATCH_UNIT = {"prefix_match_unit": 48}


def _case_id(folder, tp, pp, settings) -> str:
    suffix = "".join(f"-{key}={value}" for key, value in sorted(settings.items()))
    return f"{folder.name}-tp{tp}-pp{pp}{suffix}"


CASES = [(folder, tp, 1, {}) for folder in CONFIGS for tp in (1, 2, 4, 8)] + [(folder, 2, 2, {}) for folder in CONFIGS]
CASES += [(folder, tp, pp, NO_PREFIX_CACHING) for folder in CONFIGS if _tree(folder)["architectures"][0] in MAMBA_LIKE
          for tp, pp in ((1, 1), (2, 1), (4, 1), (8, 1), (2, 2))]
CASES += [(folder, tp, 1, PREFIX_MATCH_UNIT) for folder in CONFIGS
          if _tree(folder)["architectures"][0] == "Qwen3NextForCausalLM" for tp in (1, 4)]


def platform_differences(geometry: dict, answer: dict) -> list[str]:
    """A ``platform_alignment`` the geometry states for the model (DeepSeek V3.2's sparse backends,
    Qwen3-Next's checkpoint alignment) against what vLLM's built model gives the platform's block
    alignment (oracle_model_configs.py ``_platform``) on every rank: the backends, in vLLM's order
    with their kernel block sizes, where the oracle's are the GPU's own; the Mamba layers' prefill
    checkpoint alignment."""
    stated = geometry.get("platform_alignment")
    if not isinstance(stated, dict):
        return []
    out = []
    sizes = [stated["backend_kernel_block_sizes"], *stated.get("other_backend_kernel_block_sizes", [])]
    for rank, platform in enumerate(answer["platforms"]):
        backends = platform["backends"]
        if all(backend["gpu"] for backend in backends):
            vllm = [[b["name"], b["kernel_block_sizes"]] for b in backends]
            kvproof = [list(pair) for pair in zip(stated.get("backend_names", []), sizes)]
            if vllm != kvproof:
                out.append(f"rank {rank}: backends {vllm} (vLLM) != {kvproof} (kvproof)")
        if "mamba_prefill_checkpoint_alignment" in stated and (
                stated["mamba_prefill_checkpoint_alignment"] != platform["mamba_prefill_checkpoint_alignment"]):
            out.append(f"rank {rank}: mamba prefill checkpoint alignment {platform['mamba_prefill_checkpoint_alignment']}"
                       f" (vLLM) != {stated['mamba_prefill_checkpoint_alignment']} (kvproof)")
    return out


#: Architectures no real config in reach covers (tests/configs/SOURCES.md "Still needed"): the
#: configs derive_configs.py derives by code from each architecture's own transformers config class,
#: run in .venv-vllm into a temporary folder (never test data).
DERIVED_CASES = [(name, tp, pp, settings) for name, (_, arch) in DERIVED.items()
                 for settings in ([{}, NO_PREFIX_CACHING] if arch in MAMBA_LIKE else [{}])
                 for tp, pp in ((1, 1), (2, 1), (4, 1), (8, 1), (2, 2))]


@pytest.fixture(scope="module")
def derived_configs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("derived-configs")
    subprocess.run([str(VENV_PYTHON), str(HERE / "derive_configs.py"), str(root)], check=True, timeout=300)
    return root


@pytest.mark.parametrize("folder,tp,pp,settings", CASES, ids=[_case_id(*case) for case in CASES])
def test_geometry_matches_vllm_model_code(folder, tp, pp, settings, spec_oracle, plan_oracle):
    _check_geometry(folder, tp, pp, settings, spec_oracle, plan_oracle)


@pytest.mark.parametrize("name,tp,pp,settings", DERIVED_CASES,
                         ids=[_case_id(Path(case[0]), *case[1:]) for case in DERIVED_CASES])
def test_derived_geometry_matches_vllm_model_code(name, tp, pp, settings, derived_configs, spec_oracle,
                                                  plan_oracle):
    folder = derived_configs / name
    assert _tree(folder)["architectures"] == [DERIVED[name][1]]
    _check_geometry(folder, tp, pp, settings, spec_oracle, plan_oracle)


def _check_geometry(folder, tp, pp, settings, spec_oracle, plan_oracle):
    """kvproof's geometry of the config at ``folder`` against the specs vLLM's model reports, then
    the two plans, key by key; or the same refusal."""
    from kvproof.sim import simulate_document

    tree = _tree(folder)
    try:
        geometry = geometry_from_config(tree, tp, pp, {"available_memory_bytes": MEMORY, **settings})
        refusal = None
    except InputError as error:
        geometry, refusal = None, error.diagnostics[0]
    # Every real config here is mapped: an HF002 refusal is a failure, not a known gap.
    assert refusal is None or refusal.rule != CONFIG_ARCH, refusal.render()
    request = {"config_dir": str(folder), "tp": tp, "pp": pp, **settings}
    kvproof_plan = None
    if geometry is not None:
        request["kvproof_geometry"] = _listed_indices(geometry)
        kvproof_plan = simulate_document(geometry)
        aligned = kvproof_plan.get("platform_alignment") or {}
        if aligned.get("mamba_block_size") is not None:
            request["mamba_block_size"] = aligned["mamba_block_size"]  # checked by the plan comparison
    answer = spec_oracle(request)
    if answer["status"] == "refused":
        assert refusal is not None, f"vLLM refuses ({answer['error']}) but kvproof made a geometry"
        assert refusal.rule == CONFIG_PARALLEL
        if "must be divisible by tensor parallel size" in answer["error"]["message"]:
            assert refusal.message == answer["error"]["message"]
        return
    assert refusal is None, f"vLLM builds the model but kvproof refused: {refusal.render()}"
    assert answer["spec_differences"] == []
    assert platform_differences(geometry, answer) == []
    assert geometry["max_model_len"] == answer["max_model_len"]
    if pp > 1:
        assert geometry["workers"] == [list(rank) for rank in answer["ranks"]]
    vllm_plan = plan_oracle(_vllm_geometry(answer, geometry))
    assert vllm_plan["status"] == kvproof_plan["status"]
    assert compare(vllm_plan, kvproof_plan) == []  # the conformance suite's comparison, key by key


def _config(name: str) -> Path:
    return next(f for f in CONFIGS if f.name == name)


def test_a_wrong_head_size_is_caught(spec_oracle):
    """The comparison can fail: a geometry whose head size is off by one differs from vLLM's spec."""
    folder = next(f for f in CONFIGS if _tree(f)["architectures"][0] in ARCHITECTURES)
    geometry = geometry_from_config(_tree(folder), 1, 1, {"available_memory_bytes": MEMORY})
    geometry["layers"][0]["head_size"] += 1
    answer = spec_oracle({"config_dir": str(folder), "tp": 1, "pp": 1, "kvproof_geometry": _listed_indices(geometry)})
    assert answer["status"] == "ok" and answer["spec_differences"]


def test_a_wrong_sparse_field_or_backend_is_caught(spec_oracle):
    """DeepSeek V3.2: a top-k buffer width off by one, an indexer without its kernel-block stride
    alignment and a sparse backend's kernel block size of 16 each differ from vLLM's."""
    folder = _config("deepseek-ai--DeepSeek-V3.2")
    geometry = geometry_from_config(_tree(folder), 2, 1, {"available_memory_bytes": MEMORY})
    indexer, attention = geometry["layers"]
    attention["topk_buffer_width"] += 1
    del indexer["block_stride_alignment"]
    answer = spec_oracle({"config_dir": str(folder), "tp": 2, "pp": 1, "kvproof_geometry": _listed_indices(geometry)})
    assert answer["status"] == "ok"
    assert {d["layer"].rsplit(".", 1)[-1] for d in answer["spec_differences"]} == {"attn", "k_cache"}
    assert platform_differences(geometry, answer) == []
    geometry["platform_alignment"]["other_backend_kernel_block_sizes"] = [[{"MultipleOf": 16}]]
    assert platform_differences(geometry, answer)


def test_a_wrong_checkpoint_grid_is_caught(spec_oracle):
    """Qwen3-Next in align mode: a GDN spec whose prefill checkpoint grid is the layer's alignment
    (64) instead of the aligned block size differs from vLLM's spec, and a platform checkpoint
    alignment of 1 from what vLLM's layers give the platform."""
    from kvproof.sim import simulate_document

    folder = _config("Qwen--Qwen3-Next-80B-A3B-Thinking")
    geometry = geometry_from_config(_tree(folder), 1, 1, {"available_memory_bytes": MEMORY})
    block = simulate_document(geometry)["platform_alignment"]["mamba_block_size"]
    gdn = next(entry for entry in geometry["layers"] if entry["spec"] == "MambaSpec")
    assert gdn["prefill_checkpoint_alignment"] == block != 64
    gdn["prefill_checkpoint_alignment"] = 64
    answer = spec_oracle({"config_dir": str(folder), "tp": 1, "pp": 1, "mamba_block_size": block,
                          "kvproof_geometry": _listed_indices(geometry)})
    assert answer["status"] == "ok" and answer["spec_differences"]
    assert platform_differences(geometry, answer) == []
    geometry["platform_alignment"]["mamba_prefill_checkpoint_alignment"] = 1
    assert platform_differences(geometry, answer)

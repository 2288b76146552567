"""``kvproof geometry CONFIG`` against vLLM 0.33.0's own model code (oracle_model_configs.py), then
the whole plan: vLLM's planner (oracle.py) on the geometry made of vLLM's reported specs against
``kvproof.sim.simulate_document`` on kvproof's geometry. Real configs: tests/configs/*/config.json
(SOURCES.md names each one's origin)."""

from __future__ import annotations

from pathlib import Path

import pytest
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
MAMBA_LIKE = {"NemotronHForCausalLM", "Qwen3NextForCausalLM"}
NO_PREFIX_CACHING = {"enable_prefix_caching": False}

CASES = [(folder, tp, 1, {}) for folder in CONFIGS for tp in (1, 2, 4, 8)] + [(folder, 2, 2, {}) for folder in CONFIGS]
CASES += [(folder, tp, pp, NO_PREFIX_CACHING) for folder in CONFIGS if _tree(folder)["architectures"][0] in MAMBA_LIKE
          for tp, pp in ((1, 1), (2, 1), (4, 1), (8, 1), (2, 2))]


@pytest.mark.parametrize("folder,tp,pp,settings", CASES, ids=[
    f"{f.name}-tp{tp}-pp{pp}" + ("-no-prefix-caching" if s else "") for f, tp, pp, s in CASES])
def test_geometry_matches_vllm_model_code(folder, tp, pp, settings, spec_oracle, plan_oracle):
    from kvproof.sim import simulate_document

    tree = _tree(folder)
    try:
        geometry = geometry_from_config(tree, tp, pp, {"available_memory_bytes": MEMORY, **settings})
        refusal = None
    except InputError as error:
        geometry, refusal = None, error.diagnostics[0]
    if refusal is not None and refusal.rule == CONFIG_ARCH:
        # Not mapped (the architecture, or these settings of it): a clear refusal, never a guess.
        # This case is NOT conformance; the report lists it as missing.
        if tree["architectures"][0] in ARCHITECTURES:
            assert "mamba_cache_mode" in refusal.message
        else:
            assert all(arch in refusal.message for arch in ARCHITECTURES)
        pytest.xfail(f"{tree['architectures'][0]} is not mapped here: {refusal.message[:80]}")
    request = {"config_dir": str(folder), "tp": tp, "pp": pp, **settings}
    if geometry is not None:
        request["kvproof_geometry"] = _listed_indices(geometry)
    answer = spec_oracle(request)
    if answer["status"] == "refused":
        assert refusal is not None, f"vLLM refuses ({answer['error']}) but kvproof made a geometry"
        assert refusal.rule == CONFIG_PARALLEL
        if "must be divisible by tensor parallel size" in answer["error"]["message"]:
            assert refusal.message == answer["error"]["message"]
        return
    assert refusal is None, f"vLLM builds the model but kvproof refused: {refusal.render()}"
    assert answer["spec_differences"] == []
    assert geometry["max_model_len"] == answer["max_model_len"]
    if pp > 1:
        assert geometry["workers"] == [list(rank) for rank in answer["ranks"]]
    vllm_plan = plan_oracle(_vllm_geometry(answer, geometry))
    kvproof_plan = simulate_document(geometry)
    assert vllm_plan["status"] == kvproof_plan["status"]
    assert compare(vllm_plan, kvproof_plan) == []  # the conformance suite's comparison, key by key


def test_a_wrong_head_size_is_caught(spec_oracle):
    """The comparison can fail: a geometry whose head size is off by one differs from vLLM's spec."""
    folder = next(f for f in CONFIGS if _tree(f)["architectures"][0] in ARCHITECTURES)
    geometry = geometry_from_config(_tree(folder), 1, 1, {"available_memory_bytes": MEMORY})
    geometry["layers"][0]["head_size"] += 1
    answer = spec_oracle({"config_dir": str(folder), "tp": 1, "pp": 1, "kvproof_geometry": _listed_indices(geometry)})
    assert answer["status"] == "ok" and answer["spec_differences"]

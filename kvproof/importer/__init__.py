"""The import gate: a probe's record sets become an FPM profile only when every rule accepts them.

:func:`read_phases` loads the records of each phase directory (every ``*.json`` below it whose
kind is a worker or scheduler record; profiles and geometries there are not read) with each
record's path relative to its phase and its SHA-256. :func:`derive_profile` builds the profile
from the derivation the PA rules judge (:mod:`kvproof.rules.profile_records`), so a profile it
writes is exactly what the records give; :func:`run_import` checks the phases as one record set
(RS and every other rule), derives the profile, checks it with the records (PA, CA, PF) and
returns its canonical text only when nothing refuses. docs/import.md describes the contract.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterable

import attrs

from ..diagnostics import Diagnostic, InputError, LOAD_SYNTAX
from ..models.codec import ABSENT, dumps, present, unstructure
from ..models.documents import Document, RankTwins, load_bytes, read_document
from ..models.profile import (
    PROFILE_SCHEMA, CacheGroup, ImportProvenance, MambaCache, PhaseDifference, PhaseSource, PhaseValue, Profile,
    RecordSource, Resources, RuntimeMemory,
)
from ..models.record import SchedulerRecord, WorkerRecord
from ..rules import profile_records as derive
from ..rules.record_sets import pool_block_bytes

__all__ = ["Phase", "ImportResult", "read_phases", "derive_profile", "profile_of", "run_import",
           "DEFAULT_GPU_MEMORY_UTILIZATION", "TOOL", "LAYOUTS", "state_storage_of", "mamba_cache_of"]

TOOL = "kvproof import"
#: ``CacheConfig.gpu_memory_utilization``'s default (vllm/config/cache.py), written when no record
#: carries its raw cache config.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
#: The layouts an import writes: ``grouped`` (the default) and seed 000's ``mamba_align``.
LAYOUTS = ("grouped", "mamba_align")
#: ``state_storage`` of each state backend of the support table (``state_support.state_backend``).
_POLICIES = {"full state": "full_state", "Triton ReplaySSM": "triton_replayssm",
             "FlashInfer ReplaySSM": "flashinfer_replayssm", "KDA RecoverSSM": "kda_recoverssm"}


@attrs.frozen
class Phase:
    """One phase directory's records, each with its path relative to the directory and its SHA-256."""

    directory: str
    documents: tuple[Document, ...]
    sources: tuple[RecordSource, ...]

    @property
    def name(self) -> str | None:
        phases = {d.obj.phase for d in self.documents if present(d.obj.phase)}
        return phases.pop() if len(phases) == 1 else None


@attrs.frozen
class ImportResult:
    """A refusal (``diagnostics``) or the profile and its canonical text."""

    diagnostics: tuple[Diagnostic, ...]
    profile: Profile | None = None
    text: str | None = None


def read_phases(directories: Iterable[str]) -> list[Phase]:
    """The records of each phase directory; :class:`InputError` with every loader diagnostic (and
    ``LD001`` for a directory that is missing or holds no record)."""
    phases: list[Phase] = []
    problems: list[Diagnostic] = []
    ranks = RankTwins()
    for directory in directories:
        root = Path(directory)
        if not root.is_dir():
            problems.append(Diagnostic(LOAD_SYNTAX, "$", "phase directory: not a directory", directory))
            continue
        documents, sources = [], []
        for path in sorted(p for p in root.rglob("*.json") if p.is_file()):
            try:
                data = read_document(path)
                document = load_bytes(data, str(path), ranks=ranks)
            except InputError as exc:
                problems.extend(exc.diagnostics)
                continue
            if document.kind in ("worker", "scheduler"):
                documents.append(document)
                sources.append(RecordSource(path.relative_to(root).as_posix(), hashlib.sha256(data).hexdigest()))
        if not documents and not problems:
            problems.append(Diagnostic(LOAD_SYNTAX, "$", "phase directory holds no worker or scheduler record", directory))
        phases.append(Phase(directory, tuple(documents), tuple(sources)))
    if problems:
        raise InputError(problems)
    return phases


def _group(index: int, group, block: int, workers) -> CacheGroup:
    kind = derive.derived_kind(group)
    out = CacheGroup(name=derive.derived_name(index), kind=kind, num_layers=derive.derived_num_layers(index, workers),
                     block_size_tokens=group.block_size_tokens, page_size_bytes=block,
                     sliding_window=derive.derived_window(group))
    if kind == "state":
        out.blocks_per_request = derive.derived_blocks_per_request(group)
        out.prefill_checkpoint_blocks = derive.derived_checkpoint_blocks(group)
        alignment = derive.derived_checkpoint_alignment(group)
        out.prefill_checkpoint_alignment = alignment if present(alignment) else ABSENT
    return out


def state_storage_of(config) -> str | None:
    """The storage policy of the resolved settings (the support table's state backend; the CPU
    backend has none: None)."""
    from ..sim.startup.state_support import architecture_class, state_backend

    settings = {"use_replayssm": config.use_replayssm is True,
                "architecture": architecture_class(config.architecture if present(config.architecture) else None),
                "num_speculative_tokens": config.num_speculative_tokens if present(config.num_speculative_tokens) else 0,
                "mamba_backend": config.mamba_backend if present(config.mamba_backend) else "triton"}
    return _POLICIES.get(state_backend(settings))


def mamba_cache_of(scheduler: SchedulerRecord, block: int) -> MambaCache | None:
    """The observed align-mode geometry: the first Mamba group's block and speculative blocks,
    the scheduler's hash unit, the pool block, the draft depth (None without a Mamba spec)."""
    config = scheduler.resolved_config
    for group in scheduler.cache.groups:
        spec = derive.group_spec(group)
        if spec is not None and spec.spec_type == "MambaSpec":
            return MambaCache(
                block_size_tokens=group.block_size_tokens, hash_block_size_tokens=scheduler.cache.hash_block_size,
                page_size_bytes=block,
                num_speculative_tokens=config.num_speculative_tokens if present(config.num_speculative_tokens) else 0,
                num_speculative_blocks=spec.num_speculative_blocks if present(spec.num_speculative_blocks) else 0)
    return None


def profile_of(scheduler: SchedulerRecord, workers: list[WorkerRecord], *, model: str,
               description: str | None = None, provenance: ImportProvenance | None = None,
               memory_provenance: str = "runtime observation", layout: str = "grouped") -> Profile:
    """The profile the records give: the scheduler's groups, every page the first worker's pool
    block, ``kv_cache_bytes`` the usable blocks times the pool block (minimum over ``workers``).
    ``layout="mamba_align"`` adds the storage policy and the observed ``mamba_cache`` (the ST
    rules then judge them: a ReplaySSM record set is refused there)."""
    config = scheduler.resolved_config
    utilization = recorded_utilization([scheduler] + list(workers))
    if utilization is None:
        utilization = DEFAULT_GPU_MEMORY_UTILIZATION
    block = pool_block_bytes(workers[0].cache)
    profile = Profile(
        schema_version=PROFILE_SCHEMA, model=model,
        resources=Resources(
            cache_layout=layout,
            max_num_tokens=config.max_num_batched_tokens,
            # no batch size without max_num_seqs: 0, which CA003 and PA018 refuse
            max_batch_size=config.max_num_seqs if present(config.max_num_seqs) else 0,
            provenance=f"{TOOL}: vLLM runtime observation records",
            cache_groups=[_group(index, group, block, [w for w in workers if w.dp_rank == scheduler.dp_rank])
                          for index, group in enumerate(scheduler.cache.groups)],
            runtime_memory=RuntimeMemory(
                kv_cache_bytes=derive.derived_kv_cache_bytes([w.cache for w in workers]),
                gpu_memory_utilization=utilization, max_model_len=config.max_model_len,
                provenance=memory_provenance,
                enable_prefix_caching=config.enable_prefix_caching,
                mamba_cache_mode=scheduler.cache.mamba_cache_mode,
                hash_block_size_tokens=scheduler.cache.hash_block_size,
            ),
        ),
        description=description if description is not None else ABSENT,
        provenance=provenance if provenance is not None else ABSENT,
    )
    if layout == "mamba_align":
        policy = state_storage_of(config)
        cache = mamba_cache_of(scheduler, block)
        profile.resources.state_storage = policy if policy is not None else ABSENT
        profile.resources.mamba_cache = cache if cache is not None else ABSENT
    return profile


def recorded_utilization(records) -> object | None:
    """The first ``raw_cache_config.gpu_memory_utilization`` the records state (the scheduler's
    first), or None (PA016 compares the profile's with every record that states one)."""
    for record in derive.raw_utilization_records(records):
        if present(record.raw_cache_config.gpu_memory_utilization):
            return record.raw_cache_config.gpu_memory_utilization
    return None


def _records(phases: list[Phase], kind: str) -> list:
    return [d.obj for phase in phases for d in phase.documents if d.kind == kind]


def _differences(phases: list[Phase]) -> list[PhaseDifference]:
    """Pool sizes that differ between phases (the smallest is imported)."""
    values = []
    for phase in phases:
        blocks = [d.obj.cache.num_blocks for d in phase.documents if d.kind == "worker"]
        if blocks:
            values.append(PhaseValue(phase.name, min(blocks)))
    if len({v.value for v in values}) <= 1:
        return []
    return [PhaseDifference("$.cache.num_blocks", values)]


def derive_profile(phases: list[Phase], model: str | None = None, layout: str = "grouped") -> Profile:
    """The profile of accepted phases (the first scheduler's groups, every phase's workers);
    ``ValueError`` when no model is named (by the records or ``model``)."""
    schedulers = _records(phases, "scheduler")
    workers = _records(phases, "worker")
    names = {r.model for r in schedulers + workers if present(r.model)}
    if model is None:
        if not names:
            raise ValueError("the records name no model: pass --model NAME")
        model = names.pop()
    elif names and names != {model}:
        raise ValueError(f"--model {model!r} differs from the model the records name ({sorted(names)[0]!r})")
    scheduler = schedulers[0]
    version = scheduler.runtime.version
    phase_names = [phase.name for phase in phases]
    kinds = [derive.derived_kind(g) for g in scheduler.cache.groups]
    described = ", ".join(p if p is not None else "(unnamed)" for p in phase_names)
    provenance = ImportProvenance(
        tool=TOOL, vllm_version=version,
        phases=[PhaseSource(phase.name, list(phase.sources)) for phase in phases],
        phase_geometry_differences=_differences(phases),
    )
    utilization_note = "" if recorded_utilization(schedulers[:1] + workers) is not None \
        else "; gpu_memory_utilization not recorded: vLLM's default"
    return profile_of(
        scheduler, workers, model=model, provenance=provenance,
        description=(f"{model} on vLLM {version}: {kinds.count('state')} state and {kinds.count('attention')} attention "
                     f"cache groups, imported from {len(schedulers) + len(workers)} runtime observation records"),
        memory_provenance=f"runtime observation of phase {described}{utilization_note}",
        layout=layout,
    )


def render_profile(profile: Profile) -> str:
    return dumps(unstructure(profile))


def run_import(phases: list[Phase], probe: Iterable[Document] = (), model: str | None = None,
               profile_file: str = "profile.json", verify: Document | None = None,
               layout: str = "grouped") -> ImportResult:
    """Check the phases as one record set; derive their profile (or take ``verify``'s) and check
    it with them. The profile's diagnostics name ``profile_file``."""
    from ..rules.check import check

    records = [d for phase in phases for d in phase.documents]
    probes = [attrs.evolve(d, role="probe") for d in probe]
    diagnostics = check(records + probes, whole=True)
    if diagnostics:
        return ImportResult(tuple(diagnostics))
    if verify is None:
        profile = derive_profile(phases, model, layout)
        text = render_profile(profile)
        document = load_bytes(text, profile_file)  # the written bytes, read back as check reads them
    else:
        document, profile, text = verify, verify.obj, None
    diagnostics = check(records + probes + [document], whole=True)
    return ImportResult(tuple(diagnostics), profile if not diagnostics else None, text if not diagnostics else None)

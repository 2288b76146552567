"""``kvproof synth GEOMETRY -o DIR``: the records vLLM 0.33.0 would write for a geometry.

Every record synth writes is one ``kvproof check`` accepts: a geometry vLLM refuses to start is
exit 1 (vLLM's text), and a geometry vLLM starts but whose records kvproof's format cannot hold is
exit 2 with its reason and JSON path (an attention-free model, ``sim.synth.ATTENTION_FREE``; a
spec class the format has no kind for, finding F020; a tail ring a ``views`` backend splits into
kernel blocks, :func:`split_ring`), never a record set ``check`` refuses.
"""

from __future__ import annotations

import sys

from ..diagnostics import LOAD_SCHEMA, Diagnostic, InputError
from ..models.codec import dumps, unstructure
from ..models.geometry import expand_layers, present
from ..output import OutputError, OutputFolder, failure
from ..rules.spec_classes import SPEC_KINDS
from ..sim import PlanRefusal
from ..sim.startup.views import backend_position
from ..sim.synth import synthesize
from .simulate import read_geometry


def records_for(geometry, file: str | None = None):
    """The :class:`~kvproof.sim.synth.SynthesizedRecords` of a geometry. Raises
    :class:`~kvproof.sim.PlanRefusal` (vLLM would not start) or :class:`InputError` (no record kvproof
    checks exists for it)."""
    records = synthesize(geometry)
    entry_of = {layer.name: layer.entry_position for layer in expand_layers(geometry)}
    for name, spec in records.plan.layer_specs.items():
        kind = type(spec).__name__
        if kind not in SPEC_KINDS:
            raise InputError([Diagnostic(
                LOAD_SCHEMA, f"$.layers[{entry_of[name]}].spec",
                f"vLLM 0.33.0 plans {kind} layers ({name}), but kvproof's record format has no cache kind for "
                f"them (SC001 refuses such a record; docs/fuzz-findings.md F020): there is no record to write", file)])
    split = split_ring(geometry, records, file)
    if split is not None:
        raise InputError([split])
    return records


def split_ring(geometry, records, file: str | None = None) -> Diagnostic | None:
    """A tail ring (``CircularBufferSpec``) whose ``views`` backend needs smaller kernel blocks than
    the ring's block. vLLM's kernel-block selection would split it like any attention layer
    (``v1/worker/utils.py:658-676``), but no vLLM 0.33.0 model does: every ring backend accepts any
    multiple of 1, so a ring's kernel block is its block and VC001 refuses any other."""
    views_cfg = geometry.views
    declared = views_cfg.backends if present(views_cfg) and present(views_cfg.backends) else []
    matches = [backend.match for backend in declared]
    for worker in records.workers:
        rings = {name: spec for group in worker.cache.groups for name, spec in group.layer_specs.items()
                 if spec.spec_type == "CircularBufferSpec"}
        for name, spec in rings.items():
            kernels = {view.kernel_block_size_tokens for view in worker.cache.layer_tensors.get(name, [])}
            kernels.discard(spec.block_size)
            if not kernels:
                continue
            return Diagnostic(
                LOAD_SCHEMA, f"$.views.backends[{backend_position(name, matches)}].kernel_block_sizes",
                f"binds the ring layer {name} (CircularBufferSpec, {spec.block_size}-token blocks) to "
                f"{min(kernels)}-token kernel blocks: vLLM 0.33.0's kernel-block selection would split the ring "
                "(v1/worker/utils.py:658-676), but every ring backend of vLLM 0.33.0 accepts any multiple of 1 "
                "(KpoolTailBackend, v1/attention/backends/mla/indexer.py:325-327; CompressorBackend, "
                "models/deepseek_v41/compressor.py:45-47; QSAStateBackend and Step5CSATailRingBackend take "
                "AttentionBackend's default, v1/attention/backend.py:75-79), so no vLLM 0.33.0 model writes "
                "such a record (VC001 refuses it): there is no record to write", file)
    return None


def run(path: str, output: str) -> int:
    try:
        records = records_for(read_geometry(path), path)
    except InputError as exc:
        for diagnostic in exc.diagnostics:
            sys.stdout.write(f"{'' if diagnostic.file else path + ': '}{diagnostic.render()}\n")
        return 2
    except PlanRefusal as refusal:
        sys.stdout.write(f"{path}: vLLM 0.33.0 refuses to start: {refusal}\n")
        return 1
    # Every record is staged before the first lands: a failed write (a full disk, a file size
    # limit) leaves the folder as it was. Records an earlier synth wrote there and this one does
    # not (a pipeline stage fewer) are removed; nothing else is.
    try:
        with OutputFolder(output) as folder:
            for name, record in records.files():
                folder.add(name, dumps(unstructure(record)))
            folder.clear_own()
            written = folder.commit()
    except (OutputError, OSError) as exc:
        sys.stderr.write(f"kvproof synth: cannot write the records to {output}: {failure(exc, output)}\n")
        return 2
    for target in written:
        sys.stdout.write(f"wrote {target}\n")
    return 0

"""``kvproof simulate GEOMETRY``: vLLM 0.33.0's start-up KV cache plan for a geometry.

Exit codes: 0 the plan was computed, 1 vLLM would refuse to start (its exact text is printed),
2 bad input (diagnostics with JSON paths).  ``--format json`` prints
:func:`kvproof.sim.simulate_document`'s result; the text report reads the same typed result
(:mod:`kvproof.sim.result`).
"""

from __future__ import annotations

# kvproof.plot (--plot only: matplotlib is optional, and the module costs ~150 ms) and
# .geometry (CONFIG only: kvproof.configs is 17 more modules) are imported where they are used:
# simulate is the light command (python -X importtime -m kvproof simulate GEOMETRY).
import json
import sys
from collections.abc import Sequence
from typing import Any

from ..diagnostics import LOAD_KIND, LOAD_SYNTAX, Diagnostic, InputError
from ..models.codec import parse_json
from ..models.documents import detect_kind, load_tree, read_document
from ..models.geometry import load_geometry
from ..output import OutputError, failure, write_file
from ..sim.document import bad_input_result, simulate_result
from ..sim.result import Alignment, BadInput, Planned, Raised, Refused, Requests, RequestStep, SchedulerRefusal, SimulateResult
from ..terminal import number

EXIT_OK, EXIT_REFUSED, EXIT_BAD_INPUT = 0, 1, 2

__all__ = ["run", "run_config", "render_text", "read_geometry"]


def read_geometry(path: str):
    """Read and load a geometry file through the document reading path of ``kvproof check``
    (``read_document``, ``parse_json``, ``load_tree`` of :mod:`kvproof.models`): at most ``MAX_DOCUMENT_BYTES`` + 1 bytes are
    read (a device or an endless pipe is too large), a FIFO is opened without blocking, a
    directory or a missing file is ``LD001``, a document too big to hold in memory is ``LD001``;
    a record or a profile is ``LD003``; then the geometry is loaded strictly. Raises :class:`InputError`."""
    data = read_document(path)
    try:
        tree = parse_json(data, path)
        kind = detect_kind(tree)
        if kind not in (None, "geometry"):  # a record or a profile given where a geometry belongs
            raise InputError([Diagnostic(LOAD_KIND, "$", f"a {kind} document, not a geometry (kvproof check takes it)",
                                         path)])
        return load_tree(tree, path, kind="geometry").obj
    except MemoryError:
        raise InputError([Diagnostic(LOAD_SYNTAX, "$", "document needs more memory than is available to load it",
                                     path)]) from None


def _read(path: str, on_step: Any = None) -> SimulateResult:
    try:
        geometry = read_geometry(path)
    except InputError as error:
        return bad_input_result(error)
    return simulate_result(geometry, on_step)


def _fmt_int(value: Any) -> str:
    return number(value)


def _fmt_list(values: Sequence) -> str:
    """A per-group list of counts: ``[1,024, 8]`` would read as three numbers, so the groups'
    counts are joined by `` / `` (``[1,024 / 8]``; one group: ``[62]``)."""
    return "[" + " / ".join(_fmt_int(v) for v in values) + "]"


def render_text(result: SimulateResult, path: str = "") -> str:
    """A readable summary of a ``simulate`` result (the same objects its JSON is written from)."""
    lines: list[str] = []
    if isinstance(result, BadInput):
        lines += [d.render(d.file or path or None) for d in result.diagnostics]
        return "\n".join(lines) + "\n"
    if isinstance(result, Refused):
        lines.append(f"vLLM 0.33.0 refuses to start ({result.type}):")
        lines.append(f"  {result.message}")
        if result.source:
            source = result.source
            lines.append(f"  ({source if source.startswith('vllm/') else 'vllm/' + source})")
        return "\n".join(lines) + "\n"

    groups = result.groups
    lines.append(f"KV cache groups ({len(groups):,}), layout {result.kv_cache_layout}:")
    header = f"  {'#':>3}  {'spec':<26} {'layers':>6} {'block':>8} {'page bytes':>14} {'blocks/req':>10}  first layer"
    lines.append(header)
    for i, group in enumerate(groups):
        lines.append(
            f"  {i:>3}  {group.spec:<26} {len(group.layers):>6,} {_fmt_int(group.block_size):>8} "
            f"{_fmt_int(group.page_size_bytes):>14} {_fmt_int(group.blocks_per_request_at_max_model_len):>10}  "
            f"{group.layers[0] if group.layers else '-'}"
        )
    lines.append("")
    lines.append("Pool:")
    lines.append(f"  bytes per block          {_fmt_int(result.bytes_per_block)}")
    lines.append(f"  num_blocks               {_fmt_int(result.num_blocks)} ({_fmt_int(result.num_usable_blocks)} usable, "
                 "block 0 is the null block)")
    lines.append(f"  one max-length request   {_fmt_int(result.memory_needed_for_one_max_len_request_bytes)} bytes")
    lines.append(f"  tensors                  {len(result.kv_cache_tensors):,}")
    lines.append("")
    lines.append("Concurrency:")
    lines.append(f"  max_model_len            {_fmt_int(result.max_model_len)}")
    lines.append(f"  blocks per request       {sum(result.per_group_blocks_per_request):,} "
                 f"({' + '.join(_fmt_int(n) for n in result.per_group_blocks_per_request)})")
    concurrency = result.max_concurrency
    if concurrency is None:  # an attention-free model: vLLM computes no capacity
        lines.append("  max_concurrency          - (no KV cache layers: vLLM computes no capacity)")
    else:
        lines.append(f"  max_concurrency          {concurrency:,.2f}x")
    lines.append(f"  kv_cache_size_tokens     {_fmt_int(result.kv_cache_size_tokens)}")
    lines.append("")
    lines.append("Block sizes:")
    lines.append(f"  cache_config.block_size  {_fmt_int(result.engine_cache_config_block_size)}")
    lines.append(f"  scheduler / hash         {_fmt_int(result.scheduler_block_size)} / {_fmt_int(result.hash_block_size)}")
    lines.append(f"  cache-hit alignment      {_fmt_int(result.cache_hit_alignment_tokens)}")
    alignment = result.platform_alignment
    lines.append(f"  platform alignment       {_alignment_text(alignment)}")
    if alignment is not None and alignment.mamba_block_size is not None:
        lines.append(f"  mamba block / padded page {_fmt_int(alignment.mamba_block_size)} / "
                     f"{_fmt_int(alignment.mamba_page_size_padded)}")
    views = result.worker_views or ()
    if views:
        lines.append("")
        lines.append(f"Worker views ({len(views):,} attention groups on a small pool):")
        for view in views:
            more = f" (+{len(view.layers) - 1:,} layers)" if len(view.layers) > 1 else ""
            table = list(view.kernel_block_table)
            shown = table if len(table) <= 12 else [*table[:6], "...", *table[-3:]]
            lines.append(
                f"  group {view.kv_cache_group} {view.backend}: {view.layers[0]}{more}: "
                f"shape {tuple(view.shape)} strides {tuple(view.strides)} {view.dtype}, "
                f"kernel block {view.kernel_block_size}, kernel_block_stride {view.kernel_block_stride}, "
                f"blocks 0..2 -> {shown}"
            )
    if result.requests is not None:
        lines.extend(_render_requests(result.requests))
    for warning in result.warnings:
        lines.append(f"warning: {warning}")
    return "\n".join(lines) + "\n"


def _alignment_text(alignment: Alignment | None) -> str:
    """Which ``update_block_size_for_backend`` ran: the default platform's (and its backend), the
    geometry's ``platform_alignment``, or none."""
    if alignment is None:
        return "none (platform_alignment null, or no attention layer)"
    default = alignment.default
    if default is None:
        return "the geometry's platform_alignment"
    sizes = ", ".join(f"MultipleOf({s.base})" if hasattr(s, "base") else str(s) for s in default.backend_kernel_block_sizes)
    return (f"default ({default.platform}): backend {default.backend} [{sizes}] for "
            f"{default.num_kv_heads} KV heads x {default.head_size} {default.model_dtype}"
            f"{'' if default.cache_dtype == 'auto' else ' cache ' + default.cache_dtype}"
            f"{' MLA' if default.use_mla else ''} (no platform_alignment block; null opts out)")


def _render_requests(requests: Requests) -> list[str]:
    """The ``simulate`` block's results (docs/requests.md); consecutive steps with the same phase,
    step size and block counts are shown as one line."""
    lines: list[str] = []
    steps = requests.steps
    if steps:
        lines.append("")
        lines.append(f"One request ({len(steps):,} steps; blocks held / block-table row length per group):")
        runs: list[tuple[tuple, RequestStep, RequestStep]] = []  # (what the steps share, first step, last step)
        for step in steps:
            key = (step.phase, step.num_new_tokens, step.blocks_held, step.row_length)
            if runs and runs[-1][0] == key:
                runs[-1] = (key, runs[-1][1], step)
            else:
                runs.append((key, step, step))
        for _, first, last in runs:
            where = f"step {first.step:,}" if first is last else f"steps {first.step:,}-{last.step:,}"
            lines.append(
                f"  {where:<16} {first.phase:<8} +{first.num_new_tokens:,} tokens from {first.num_computed_tokens:,}: "
                f"held {_fmt_list(first.blocks_held)} row {_fmt_list(first.row_length)}, "
                f"{_fmt_int(last.free_blocks)} free"
            )
    if requests.rejected:
        lines.append("")
        lines.append(f"One request: vLLM 0.33.0's input processor rejects it: {requests.rejected}")
    if requests.stalled:
        lines.append("  the request never fits: vLLM would keep it waiting (the run stops here)")
    if requests.truncated:
        lines.append("  max_steps reached (the run stops here)")
    raised = requests.raised
    if raised is not None:
        lines.append("")
        lines.append(f"One request: vLLM 0.33.0 raises {raised.type} while serving it: {raised.message}")
        lines.append(f"  (the ported raise: {raised.at})")
    probe = requests.prefix_hit_probe
    if probe is not None:
        lines.append(f"  prefix-hit probe: {probe.hit_tokens:,} of {probe.prompt_tokens:,} prompt tokens hit "
                     f"(blocks {_fmt_list(probe.hit_blocks)})")
    workload = requests.workload
    if isinstance(workload, Raised):
        lines.append("")
        lines.append(f"Workload: vLLM 0.33.0 raises {workload.type} while serving it: {workload.message}")
        lines.append(f"  (the ported raise: {workload.at})")
    elif isinstance(workload, SchedulerRefusal):
        lines.append("")
        lines.append(f"Workload: vLLM 0.33.0 refuses the scheduler settings ({workload.type}):")
        lines.append(f"  {workload.message}")
        lines.append(f"  (vllm/{workload.source})")
    elif workload is not None:
        totals = workload.totals
        lines.append("")
        lines.append(
            f"Workload: {len(workload.requests):,} requests, {totals.steps:,} steps, "
            f"{totals.request_steps:,} request-steps, {totals.finished:,} finished, "
            f"{totals.preemptions:,} preemptions" + (" (truncated at max_steps)" if workload.truncated else "")
        )
        hits = sum(1 for r in workload.requests.values() if r.prefix_hit_tokens)
        if hits:
            lines.append(f"  {hits:,} requests started with a prefix-cache hit")
        for rid, info in workload.requests.items():
            if info.rejected:
                lines.append(f"  request {rid!r} rejected: {info.rejected}")
    return lines


def run(path: str, fmt: str = "text", plot: str | None = None) -> int:
    recorder = _recorder(plot)
    if isinstance(recorder, int):
        return recorder
    result = _read(path, recorder)
    return _draw(plot, result, recorder, _report(result, path, fmt))


def _recorder(plot: str | None):
    """None without --plot; else the workload recorder of the picture, or exit 2 at once (before
    any simulation) when the picture cannot be drawn: a name without .svg/.png, no matplotlib."""
    if plot is None:
        return None
    from ..plot import FORMATS, PlotUnavailable, WorkloadRecorder, picture_format, require

    if picture_format(plot) is None:
        sys.stderr.write(f"kvproof simulate: --plot {plot}: the picture's name must end in "
                         f"{' or '.join('.' + f for f in FORMATS)}\n")
        return EXIT_BAD_INPUT
    try:
        require()
    except PlotUnavailable as exc:
        sys.stderr.write(f"kvproof simulate: {exc}\n")
        return EXIT_BAD_INPUT
    return WorkloadRecorder()


def _draw(plot: str | None, result: SimulateResult, recorder, code: int) -> int:
    """Write the picture of a planned geometry; a refused or bad geometry has none (its report says
    why; the exit code stays)."""
    if plot is None or not isinstance(result, Planned):
        if plot is not None and isinstance(result, Refused):
            sys.stderr.write(f"kvproof simulate: no picture: vLLM 0.33.0 would not start ({plot} not written)\n")
        return code
    from ..plot import picture_format, render

    try:
        write_file(plot, render(result.to_json(), picture_format(plot), recorder.held))
    except (OutputError, OSError) as exc:
        sys.stderr.write(f"kvproof simulate: cannot write the picture: {failure(exc, plot)}\n")
        return EXIT_BAD_INPUT
    return code


def _report(result: SimulateResult, path: str, fmt: str) -> int:
    if fmt == "json":
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        # diagnostics and vLLM's refusals go to stdout with the plan, as every command's do (docs/cli.md)
        sys.stdout.write(render_text(result, path))
    if isinstance(result, BadInput):
        return EXIT_BAD_INPUT
    if isinstance(result, Refused):
        return EXIT_REFUSED
    requests = result.requests
    if requests is not None and (isinstance(requests.workload, (SchedulerRefusal, Raised)) or requests.raised):
        return EXIT_REFUSED  # vLLM would not start with the workload's settings, or fails serving
    return EXIT_OK


def run_config(config: str, tp: int, pp: int, settings: tuple[str, ...], fmt: str = "text",
               plot: str | None = None) -> int:
    """``simulate CONFIG --tp N --set ...``: ``kvproof geometry`` then ``simulate`` in one step."""
    from .geometry import build, parse_settings

    recorder = _recorder(plot)
    if isinstance(recorder, int):
        return recorder
    try:
        result = simulate_result(load_geometry(build(config, tp, pp, parse_settings(settings)), config), recorder)
    except InputError as error:
        result = bad_input_result(error)
    return _draw(plot, result, recorder, _report(result, config, fmt))

"""``kvproof simulate GEOMETRY --plot FILE.svg|FILE.png``: the plan, and requests over time, drawn.

matplotlib is an optional extra (``pip install 'kvproof[plot]'``), imported only here and only for
``--plot``. The picture has up to three panels:

* **the pool split by group** at start-up: vLLM's concurrency is ``num_blocks`` over the blocks one
  request at ``max_model_len`` holds in all groups, which draw from one pool
  (``get_max_concurrency_for_kv_cache_config``, vllm/v1/core/kv_cache_utils.py:1061-1087); at that
  concurrency each group holds its share of the pool, so the pool's bar is split by
  ``blocks_per_request[g] / sum(blocks_per_request)``;
* **blocks per request at max_model_len**, per group (``cdiv(max_memory_usage_bytes,
  page_size_bytes)``, the same lines);
* **requests over time**: for the single request (``simulation[]``) and the workload
  (``workload.steps``, docs/requests.md) the blocks each group holds after each step (stacked) and
  the pool's free blocks (``block_pool.get_num_free_blocks()``); a workload's preemptions are red
  lines, its prefix-cache hits (a request admitted with computed tokens) green triangles.

Every artist carries a ``gid`` (``pool-group-0``, ``blocks-per-request``, ``request-held-group-0``,
``workload-held-group-1``, ``workload-free-blocks``, ``preemption-0``, ``prefix-hit``, ...) that an
SVG keeps as an element ``id``, and SVG text stays text (``svg.fonttype: none``), so the picture can
be checked. The same result gives the same bytes (``svg.hashsalt`` fixed, no date in the metadata).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from .diagnostics import KvproofError

__all__ = ["FORMATS", "PlotUnavailable", "WorkloadRecorder", "require", "picture_format", "render"]

FORMATS = ("svg", "png")
INSTALL = "pip install 'kvproof[plot]'"
#: The groups take matplotlib's tab10 colours; the free blocks, preemptions and hits these.
_FREE, _PREEMPT, _HIT = "#333333", "#d62728", "#2ca02c"


class PlotUnavailable(KvproofError):
    """--plot cannot draw here (matplotlib is not installed); ``str()`` says what to install."""


def require() -> None:
    """Raise :class:`PlotUnavailable` when matplotlib cannot be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise PlotUnavailable(f"--plot needs matplotlib, which is not installed ({exc}): {INSTALL}") from None


def picture_format(path: str) -> str | None:
    """``svg`` or ``png`` from the file name, else None."""
    suffix = Path(path).suffix.lower().lstrip(".")
    return suffix if suffix in FORMATS else None


class WorkloadRecorder:
    """``on_step`` of :func:`kvproof.sim.requests.scheduler.simulate_workload`: the blocks each group holds
    after each workload step (the ``workload`` JSON keeps only the free blocks)."""

    def __init__(self) -> None:
        self.held: list[list[int]] = []

    def __call__(self, step: dict, manager: Any) -> None:
        from .sim.requests.request_trace import held_by_group

        self.held.append(held_by_group(manager))


def _group_label(index: int, group: dict) -> str:
    first = group["layers"][0] if group["layers"] else "-"
    more = f" (+{len(group['layers']) - 1:,} layers)" if len(group["layers"]) > 1 else ""
    return f"g{index}: {first}{more}, block {group['block_size']:,}"


def _thousands(axis) -> None:
    """Whole-number ticks (blocks and steps are counted) labelled with thousands separators, as
    every number kvproof shows a person."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))


def _startup(axes_pool, axes_request, axes_legend, result: dict, colours: list) -> None:
    groups = result["groups"]
    per_request = result["per_group_blocks_per_request"]
    pool = result["num_usable_blocks"]
    axes_pool.set_title(f"The pool at start-up: {pool:,} usable blocks", fontsize=10, loc="left")
    axes_pool.set_xlabel(f"blocks of {result['bytes_per_block']:,} bytes (block 0, the null block, not shown)")
    axes_pool.set_yticks([])
    axes_pool.set_xlim(0, max(pool, 1))
    demand = sum(per_request)
    if not demand:
        axes_pool.text(0.5, 0.5, "no KV cache layers: vLLM computes no capacity", ha="center", va="center",
                       transform=axes_pool.transAxes, gid="pool-empty")
    else:
        left = 0.0
        concurrency = result["max_concurrency"] or 0
        for index, blocks in enumerate(per_request):
            share = pool * blocks / demand
            axes_pool.barh([0], [share], left=left, color=colours[index], edgecolor="white",
                           label=f"{_group_label(index, groups[index])}: {blocks:,}/request, {share:,.1f} blocks",
                           gid=f"pool-group-{index}")
            if share > pool * 0.06:
                axes_pool.text(left + share / 2, 0, f"g{index}\n{share:,.0f}", ha="center", va="center", fontsize=8,
                               color="white")
            left += share
        handles, labels = axes_pool.get_legend_handles_labels()
        axes_legend.legend(handles, labels, loc="upper left", ncol=2 if len(handles) > 3 else 1, fontsize=7,
                           mode="expand", borderaxespad=0,
                                title=f"the pool split by group at max_concurrency {concurrency:,.2f}x "
                                      f"(each group's share of the blocks one request holds)", title_fontsize=8)
    axes_request.set_title(f"Blocks per request at {result['max_model_len']:,} tokens", fontsize=10, loc="left")
    names = [f"g{i}" for i in range(len(groups))]
    bars = axes_request.bar(names, per_request, color=colours[:len(groups)], gid="blocks-per-request")
    axes_request.bar_label(bars, labels=[f"{n:,}" for n in per_request], fontsize=8)
    axes_request.set_xlabel("KV cache group")
    axes_request.set_ylabel("blocks")
    axes_request.margins(y=0.15)
    for axis in (axes_pool.xaxis, axes_request.yaxis):
        _thousands(axis)


def _over_time(axes, panel: str, title: str, steps: list[int], held: list[list[int]], free: list[int], groups: list,
               colours: list, pool: int, shared_scale: bool) -> Any:
    """Stacked blocks held per group and the free blocks (right axis, 0 to the pool's usable
    blocks) after each step; ``shared_scale``: the held axis spans the pool too (a workload's
    groups and free blocks add up to it). ``panel`` (``request``, ``workload``) starts the gids."""
    if steps:  # the last step drawn one step wide, as every other
        steps, held, free = [*steps, steps[-1] + 1], [*held, held[-1]], [*free, free[-1]]
    axes.set_title(title, fontsize=10, loc="left")
    axes.set_xlabel("step")
    axes.set_ylabel("blocks held (stacked by group)")
    series = list(zip(*held)) if held else [[] for _ in groups]
    # an edge as wide as a pixel keeps a one-step spike (a long prompt prefilled and finished at
    # once) visible on a long run
    axes.stackplot(steps, *series, colors=colours[:len(series)], step="post", alpha=0.85, linewidth=0.6,
                   labels=[_group_label(i, g) for i, g in enumerate(groups)])
    for index, collection in enumerate(axes.collections[-len(series):] if series else []):
        collection.set_gid(f"{panel}-held-group-{index}")
        collection.set_edgecolor(colours[index])
    right = axes.twinx()
    right.step(steps, free, where="post", color=_FREE, linewidth=1.2, label="free blocks", gid=f"{panel}-free-blocks")
    right.set_ylabel("free blocks")
    right.set_ylim(0, max(pool, 1) * 1.04)
    axes.set_ylim(0, max(pool, 1) * 1.04) if shared_scale else axes.set_ylim(bottom=0)
    for axis in (axes.xaxis, axes.yaxis, right.yaxis):
        _thousands(axis)
    axes.set_xlim(steps[0] if steps else 0, steps[-1] if steps else 1)
    return right


def _mark_workload(axes, workload: dict) -> None:
    """Preemptions as red lines (labelled with the request, staggered where they crowd), prefix-cache
    hits as green triangles at the step a request was admitted (new or resumed) with computed tokens."""
    preempted = [(s["step"], r) for s in workload["steps"] for r in s["preempted"]]
    hits = [(s["step"], r, n) for s in workload["steps"] for r, n in s["admitted"].items() if n]
    top = axes.get_ylim()[1]
    left, right = axes.get_xlim()
    crowded = (right - left) * 0.03
    level, previous = 0, None
    for number, (step, rid) in enumerate(preempted):
        level = (level + 1) % 3 if previous is not None and step - previous < crowded else 0
        previous = step
        axes.axvline(step, color=_PREEMPT, linestyle="--", linewidth=1, gid=f"preemption-{number}",
                     label=f"preemption ({len(preempted):,})" if number == 0 else None)
        axes.text(step, top * (0.02 + 0.3 * level), f"preempt {rid}", color=_PREEMPT, fontsize=7, rotation=90,
                  va="bottom", ha="right", bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1})
    if hits:
        axes.scatter([h[0] for h in hits], [top * 0.97] * len(hits), marker="v", color=_HIT, zorder=5,
                     label=f"prefix hit at admission ({len(hits):,})", gid="prefix-hit")


def render(result: dict, fmt: str, held: list[list[int]] | None = None) -> bytes:
    """The picture of a ``simulate`` result of status ``ok`` as SVG or PNG bytes; ``held`` is the
    :class:`WorkloadRecorder`'s series of the same run."""
    import matplotlib  # a Figure of its own, no pyplot: the user's backend is left alone
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    groups = result["groups"]
    workload = result.get("workload") or {}
    single = [s for s in result.get("simulation") or [] if s["phase"] != "prefix_hit_probe"]
    drawn_workload = bool(workload.get("steps")) and held is not None and len(held) == len(workload["steps"])
    rows = 2 + bool(single) + drawn_workload
    palette = colormaps["tab10"]
    colours = [palette(i % 10) for i in range(max(len(groups), 1))]
    # path.simplify off: every step stays a vertex of its series (the picture can be checked)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "kvproof", "font.size": 9,
                                "axes.spines.top": False, "path.simplify": False}):
        legend_rows = (len(groups) + 1) // 2 if len(groups) > 3 else len(groups)
        heights = [3.2, 0.35 + 0.16 * legend_rows] + [3.6] * (rows - 2)
        figure = Figure(figsize=(11, sum(heights) + 0.3), layout="constrained")
        grid = figure.add_gridspec(rows, 2, width_ratios=[3, 2], height_ratios=heights)
        legend = figure.add_subplot(grid[1, :])
        legend.set_axis_off()
        _startup(figure.add_subplot(grid[0, 0]), figure.add_subplot(grid[0, 1]), legend, result, colours)
        row = 2
        if single:
            axes = figure.add_subplot(grid[row, :])
            right = _over_time(axes, "request", "One request over time (simulate.prompt_tokens)", [s["step"] for s in single],
                               [s["blocks_held"] for s in single], [s["free_blocks"] for s in single], groups, colours,
                               result["num_usable_blocks"], shared_scale=False)
            probe = result.get("prefix_hit_probe")
            if probe:
                axes.text(0.01, 0.04, f"prefix-hit probe: {probe['hit_tokens']:,} of {probe['prompt_tokens']:,} "
                          f"prompt tokens hit", transform=axes.transAxes, color="white", va="bottom", gid="probe",
                          bbox={"facecolor": _HIT, "edgecolor": "none", "pad": 3})
            _legend(axes, right)
            row += 1
        if drawn_workload:
            axes = figure.add_subplot(grid[row, :])
            totals = workload["totals"]
            right = _over_time(axes, "workload", f"Workload over time: {len(workload['requests']):,} requests, "
                               f"{totals['steps']:,} steps, {totals['preemptions']:,} preemptions",
                               [s["step"] for s in workload["steps"]], held,
                               [s["free_blocks"] for s in workload["steps"]], groups, colours,
                               result["num_usable_blocks"], shared_scale=True)
            _mark_workload(axes, workload)
            _legend(axes, right)
        buffer = io.BytesIO()
        figure.savefig(buffer, format=fmt, dpi=100, metadata={"Date": None} if fmt == "svg" else {"Software": None})
    return buffer.getvalue()


def _legend(axes, right) -> None:
    handles, labels = axes.get_legend_handles_labels()
    more, more_labels = right.get_legend_handles_labels()
    axes.legend(handles + more, labels + more_labels, loc="upper left", bbox_to_anchor=(1.06, 1), fontsize=8)

"""``kvproof synth GEOMETRY -o DIR``: the records vLLM 0.33.0 would write for a geometry."""

from __future__ import annotations

import sys
from pathlib import Path

from ..diagnostics import InputError
from ..models.codec import dumps, parse_json, unstructure


def run(path: str, output: str) -> int:
    from ..models.geometry import load_geometry
    from ..sim import Refusal
    from ..sim.synth import synthesize

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        sys.stdout.write(f"{path}: LD001 $: cannot read file: {exc.strerror or exc}\n")
        return 2
    try:
        geometry = load_geometry(parse_json(data, path), path)
    except InputError as exc:
        for diagnostic in exc.diagnostics:
            sys.stdout.write(diagnostic.render() + "\n")
        return 2
    try:
        records = synthesize(geometry)
    except Refusal as refusal:
        sys.stdout.write(f"{path}: vLLM 0.33.0 refuses to start: {refusal}\n")
        return 1
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    for name, record in records.files():
        (out / name).write_text(dumps(unstructure(record)), encoding="utf-8")
        sys.stdout.write(f"wrote {out / name}\n")
    return 0

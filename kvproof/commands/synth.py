"""``kvproof synth GEOMETRY -o DIR``: the records vLLM 0.33.0 would write for a geometry."""

from __future__ import annotations

import sys
from pathlib import Path

from ..diagnostics import InputError
from ..models.codec import dumps, unstructure
from .simulate import read_geometry


def run(path: str, output: str) -> int:
    from ..sim import Refusal
    from ..sim.synth import synthesize

    try:
        geometry = read_geometry(path)
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
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, record in records.files():
            (out / name).write_text(dumps(unstructure(record)), encoding="utf-8")
            sys.stdout.write(f"wrote {out / name}\n")
    except OSError as exc:
        sys.stderr.write(f"kvproof synth: cannot write the records to {output}: {exc.strerror or exc}\n")
        return 2
    return 0

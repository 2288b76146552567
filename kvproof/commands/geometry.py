"""``kvproof geometry CONFIG [--tp N] [--pp N] [--set KEY=VALUE ...] [-o FILE]``: the geometry of a
Hugging Face ``config.json`` (or a folder holding one) as vLLM 0.33.0's model code reports it.

Exit codes: 0 written, 2 bad input (an unreadable config, an architecture kvproof does not map, a
key vLLM needs, a TP/PP vLLM refuses, a bad ``--set``; each one diagnostic with its path).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import attrs

from ..configs import geometry_from_config
from ..configs.hf import parse_config
from ..diagnostics import LOAD_SCHEMA, Diagnostic, InputError
from ..models.codec import dumps
from ..models.documents import read_document
from ..models.geometry import Geometry, load_geometry
from ..output import OutputError, failure, write_file

EXIT_OK, EXIT_BAD_INPUT = 0, 2

__all__ = ["run", "build", "parse_settings", "config_path"]


def config_path(path: str) -> str:
    """``path`` itself, or ``path/config.json`` for a folder."""
    return os.path.join(path, "config.json") if os.path.isdir(path) else path


def parse_settings(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; VALUE is JSON when it parses, else the string. KEY must be a top-level
    geometry field (``kvproof schema geometry``) other than ``layers``."""
    fields = {field.name for field in attrs.fields(Geometry)} - {"layers"}
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise InputError([Diagnostic(LOAD_SCHEMA, "--set", f"expected KEY=VALUE, got {pair!r}")])
        if key not in fields:
            raise InputError([Diagnostic(LOAD_SCHEMA, f"--set {key}",
                                         f"not a top-level geometry field; expected one of {', '.join(sorted(fields))}")])
        try:
            out[key] = json.loads(text)
        except ValueError:
            out[key] = text
    return out


def build(config: str, tp: int, pp: int, settings: dict[str, Any]) -> dict[str, Any]:
    """The geometry tree of ``config``, checked by the strict geometry loader. Raises
    :class:`InputError`."""
    path = config_path(config)
    tree = parse_config(read_document(path), path)
    name = os.path.basename(os.path.dirname(os.path.abspath(path))) if os.path.basename(path) == "config.json" else None
    geometry = geometry_from_config(tree, tp, pp, settings, file=path, name=name)
    if "available_memory_bytes" not in geometry and "num_gpu_blocks_override" not in geometry:
        raise InputError([Diagnostic(LOAD_SCHEMA, "--set available_memory_bytes",
                                     "vLLM 0.33.0 profiles the KV cache memory on the GPU; give it with "
                                     "--set available_memory_bytes=BYTES (or num_gpu_blocks_override)", path)])
    load_geometry(geometry, "<geometry>")  # the --set values must make a valid geometry
    return geometry


def run(config: str, tp: int, pp: int, pairs: tuple[str, ...], output: str | None) -> int:
    try:
        geometry = build(config, tp, pp, parse_settings(pairs))
    except InputError as error:
        for diagnostic in error.diagnostics:
            sys.stderr.write(diagnostic.render() + "\n")
        return EXIT_BAD_INPUT
    text = dumps(geometry)
    if output is None:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        write_file(output, text)
    except (OutputError, OSError) as exc:
        sys.stderr.write(f"kvproof geometry: cannot write {output}: {failure(exc, output)}\n")
        return EXIT_BAD_INPUT
    sys.stdout.write(f"wrote {output}\n")
    return EXIT_OK

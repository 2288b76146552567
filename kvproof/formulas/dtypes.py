"""The one dtype table: bytes per element of each torch dtype name kvproof reads.

The simulator reads it with a geometry's canonical dtype (``kvproof.models.geometry`` turns the
format's spellings, ``bf16``/``fp8``, into torch names), the rules with a record's dtype field as
the probe wrote it (``torch.`` prefix allowed), the fuzzers to size what they draw.
"""

from __future__ import annotations

from typing import Any

from ..logic import If, Or, symbolic_memo

__all__ = ["ELEMENT_BYTES", "dtype_size", "element_bytes"]

#: ``torch.tensor([], dtype=torch.<name>).element_size()`` of every torch dtype name a geometry or
#: a record may name, and vLLM's cache dtype strings ``fp8``/``fp8_e4m3`` (one byte).
ELEMENT_BYTES: dict[str, int] = {
    "bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4, "float64": 8, "uint8": 1, "int8": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "fp8": 1, "fp8_e4m3": 1, "int32": 4, "int64": 8,
}


def dtype_size(dtype: str) -> int:
    """``get_dtype_size`` (vllm/utils/torch_utils.py:347-349) of a torch dtype name (KeyError
    when the table has none: the simulator is only given names the geometry loader accepted)."""
    return ELEMENT_BYTES[dtype]


def element_bytes(dtype: Any) -> Any:
    """The element size of a record's dtype field (``torch.`` prefix allowed): 0 when the name is
    unknown, absent or null; a z3 term for a symbolic name."""
    if type(dtype) is str:
        return ELEMENT_BYTES.get(dtype.removeprefix("torch."), 0)
    if dtype is None or type(dtype).__name__ == "Absent":
        return 0
    # the same dtype leaf is read by several rules on every shape of its kind: its term built once
    return symbolic_memo(_element_bytes_term, dtype)


def _element_bytes_term(dtype: Any) -> Any:
    out = 0
    for name, size in ELEMENT_BYTES.items():
        out = If(Or(dtype == name, dtype == f"torch.{name}"), size, out)
    return out

"""vLLM start-up refusals (B.8) and the exception types of the port.

The port raises vLLM's own exception classes through thin subclasses
(:class:`VllmValueError` is a ``ValueError`` ...), so vLLM's control flow (``except
AssertionError`` in ``is_kv_cache_spec_uniform``, ``except (AssertionError, ValueError)`` in the
bucket merge, ``except NotImplementedError`` around page unification) runs unchanged, while a
genuine bug of kvproof (a plain ``TypeError``) is never mistaken for a refusal.  :func:`plan`
turns an escaping one into :class:`PlanRefusal`, which carries vLLM's exact text.
"""

from __future__ import annotations

from ...diagnostics import KvproofError

__all__ = [
    "PlanRefusal", "VllmError", "VllmAssertionError", "VllmValueError", "VllmNotImplementedError",
    "VllmTypeError", "VllmStopIteration", "as_refusal", "nonzero", "ZERO_DIVISION", "format_gib", "memory_check_message", "no_memory_message",
    "AUTO_FIT_MESSAGE",
]


class PlanRefusal(KvproofError):
    """vLLM 0.33.0 would refuse to start: ``message`` is its exact text, ``kind`` the Python
    exception class vLLM raises (``ValueError``, ``AssertionError`` ...), ``source`` the vLLM
    file:line that raises it."""

    def __init__(self, message: str, kind: str = "ValueError", source: str | None = None):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.source = source

    def __repr__(self) -> str:
        return f"PlanRefusal({self.message!r}, kind={self.kind!r})"


class VllmError(KvproofError):
    """Marker of an exception raised where vLLM raises one (its subclasses add vLLM's own class as
    a second base, so vLLM's ``except`` clauses catch them)."""

    kind = "Exception"
    source: str | None = None

    def __init__(self, message: str = "", source: str | None = None):
        super().__init__(message)
        self.source = source


class VllmAssertionError(VllmError, AssertionError):
    kind = "AssertionError"


class VllmValueError(VllmError, ValueError):
    kind = "ValueError"


class VllmNotImplementedError(VllmError, NotImplementedError):
    kind = "NotImplementedError"


class VllmTypeError(VllmError, TypeError):
    kind = "TypeError"


class VllmStopIteration(VllmError):
    """A bare ``next()`` in vLLM that finds nothing (raised as ``StopIteration``)."""

    kind = "StopIteration"


def as_refusal(exc: BaseException) -> PlanRefusal:
    if isinstance(exc, VllmError):
        return PlanRefusal(str(exc), exc.kind, exc.source)
    return PlanRefusal(str(exc), type(exc).__name__)


ZERO_DIVISION = "integer division or modulo by zero"


def nonzero(divisor: int) -> int:
    """A concrete divisor of vLLM's integer arithmetic: Python (and so vLLM) raises
    ``ZeroDivisionError`` where :mod:`kvproof.logic` defines ``x // 0 == 0`` for the solver."""
    if divisor == 0:
        raise ZeroDivisionError(ZERO_DIVISION)
    return divisor


GiB_bytes = 1 << 30


def format_gib(b: int) -> str:
    """``format_gib`` (vllm/utils/mem_utils.py:30-31)."""
    return f"{round(b / GiB_bytes, 2)}"


def no_memory_message() -> str:
    """``_check_enough_kv_cache_memory`` (kv_cache_planning.py:56-64)."""
    return (
        "No available memory for the cache blocks. "
        "Try increasing `gpu_memory_utilization` when initializing the engine "
        "(this flag also controls CPU memory reservation on the CPU "
        "backend, despite its name). "
        "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ "
        "for more details."
    )


def memory_check_message(max_model_len: int, needed: int, available: int, estimated_max_len: int) -> str:
    """``_check_enough_kv_cache_memory`` (kv_cache_planning.py:66-87), stray "(" included."""
    estimated_msg = ""
    if estimated_max_len > 0:
        estimated_msg = (
            "Based on the available memory, "
            f"the estimated maximum model length is {estimated_max_len}. "
        )
    return (
        f"To serve at least one request with the model's max seq len "
        f"({max_model_len}), ({format_gib(needed)} GiB KV "
        f"cache is needed, which is larger than the available KV cache "
        f"memory ({format_gib(available)} GiB). {estimated_msg}"
        f"Try increasing `gpu_memory_utilization` (which also controls "
        f"CPU memory on the CPU backend) or decreasing `max_model_len` "
        f"when initializing the engine. "
        f"See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ "
        f"for more details."
    )


#: ``_auto_fit_max_model_len`` (kv_cache_planning.py:1400-1404).
AUTO_FIT_MESSAGE = (
    "Cannot auto-fit max_model_len: not enough GPU memory available "
    "to serve even a single token. Try increasing `gpu_memory_utilization`."
)

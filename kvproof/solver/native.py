"""The two places kvproof calls native code itself, both for speed and neither with anything an
input can choose: z3's own C entry points (the functions the ``z3`` package wraps) for the DAG
walks, and glibc's ``mallopt`` with constant arguments (:func:`tune_process`).
``tests/robustness/test_robust_source.py`` allows ``ctypes`` in this module only."""

from __future__ import annotations

import ctypes
import functools
import gc
from typing import Any

import z3
from z3 import z3core
from z3.z3types import Ast

__all__ = ["raw_api", "expr_at", "tune_process", "SOLVER_GC_THRESHOLDS"]


class _Raw:
    """z3's C API for the DAG walks, without the Python wrappers' per-call work: each wrapper in
    ``z3core`` converts its arguments through Python ``from_param`` hooks and asks for the error
    code after the call, which was most of a walk's time (about 4 M of each in ``prove --all``).
    The walks only read terms the process holds (no call here can fail), so the same entry points
    called with C argument types (pointers as ints) answer the same."""

    def __init__(self) -> None:
        p, u = ctypes.c_void_p, ctypes.c_uint
        self.ast_id = _entry("Z3_get_ast_id", u, p, p)
        self.ast_kind = _entry("Z3_get_ast_kind", u, p, p)
        self.to_app = _entry("Z3_to_app", p, p, p)
        self.num_args = _entry("Z3_get_app_num_args", u, p, p)
        self.app_decl = _entry("Z3_get_app_decl", p, p, p)
        self.decl_kind = _entry("Z3_get_decl_kind", u, p, p)
        self.app_arg = _entry("Z3_get_app_arg", p, p, p, u)
        self.decl_name = _entry("Z3_get_decl_name", p, p, p)
        self.symbol_string = _entry("Z3_get_symbol_string", ctypes.c_char_p, p, p)


def _entry(name: str, restype: Any, *argtypes: Any) -> Any:
    """The C function behind ``z3core.<name>`` (the wrapper keeps it as its default argument's
    ``f``) with plain C argument types."""
    pointer = getattr(z3core, name).__defaults__[0].f
    return ctypes.CFUNCTYPE(restype, *argtypes)(ctypes.cast(pointer, ctypes.c_void_p).value)


def _ast(address: int) -> Any:
    """A z3 ``Ast`` handle (what z3's wrappers take) of an address a raw call returned."""
    return Ast.from_buffer_copy(ctypes.c_void_p(address))


class _Wrapped:
    """The same calls through z3's own wrappers (pointers as ints in and out, as :class:`_Raw`),
    for a z3 whose wrappers keep their C functions otherwise: slower, never wrong."""

    _ast = staticmethod(_ast)

    @staticmethod
    def _ctx() -> Any:
        return z3.main_ctx().ref()

    def ast_id(self, _ctx: int, ast: int) -> int:
        return z3core.Z3_get_ast_id(self._ctx(), self._ast(ast))

    def ast_kind(self, _ctx: int, ast: int) -> int:
        return z3core.Z3_get_ast_kind(self._ctx(), self._ast(ast))

    def to_app(self, _ctx: int, ast: int) -> int:
        return z3core.Z3_to_app(self._ctx(), self._ast(ast)).value

    def num_args(self, _ctx: int, app: int) -> int:
        return z3core.Z3_get_app_num_args(self._ctx(), self._ast(app))

    def app_decl(self, _ctx: int, app: int) -> int:
        return z3core.Z3_get_app_decl(self._ctx(), self._ast(app)).value

    def decl_kind(self, _ctx: int, decl: int) -> int:
        return z3core.Z3_get_decl_kind(self._ctx(), self._ast(decl))

    def app_arg(self, _ctx: int, app: int, index: int) -> int:
        return z3core.Z3_get_app_arg(self._ctx(), self._ast(app), index).value

    def decl_name(self, _ctx: int, decl: int) -> Any:
        return z3core.Z3_get_decl_name(self._ctx(), self._ast(decl))

    def symbol_string(self, _ctx: int, symbol: Any) -> bytes:
        return z3core.Z3_get_symbol_string(self._ctx(), symbol).encode("utf-8")


@functools.cache
def raw_api() -> _Raw | _Wrapped:
    """The raw entry points (:class:`_Raw`), made once; z3's wrappers when they cannot be found."""
    try:
        return _Raw()
    except (AttributeError, IndexError, TypeError):
        return _Wrapped()


def expr_at(address: int) -> Any:
    """The z3 expression (main context) at the AST address a raw walk returned."""
    return z3.z3._to_expr_ref(_ast(address), z3.main_ctx())


#: glibc's mallopt(3) parameters and the values :func:`tune_process` sets.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_TRIM_THRESHOLD = 256 << 20
_MMAP_THRESHOLD = 32 << 20  # glibc's largest (HEAP_MAX / 2 on 64-bit)
#: The cyclic garbage collector's thresholds for a solver process (Python's: 700, 10, 10).
SOLVER_GC_THRESHOLDS = (10_000, 20, 20)


@functools.cache
def tune_process() -> None:
    """Tune the process for the solver's way of allocating (``prove``, ``claim``, ``explore``,
    ``fuzz`` call it first; process state by nature, set once):

    * the cyclic garbage collector runs less often: a ``prove --all`` keeps hundreds of MB of
      sessions, leaves and terms alive, and each of the 13 full collections Python's thresholds
      made walked all of it (1.5 s of a 19.5 s run; with these thresholds none ran and every
      collection together took 0.6 s, the peak memory the same: 650 MB);
    * glibc keeps the memory z3 frees (elsewhere nothing happens): every question gets a z3
      context of its own (:class:`~kvproof.solver.calls.IsolatedSolver`), whose large tables
      glibc mapped and unmapped around each question, trimming the freed heap back to the system
      (``prove VC007``: 315,000 minor page faults and 0.64 s of system time; with these values
      41,000 and 0.13 s)."""
    gc.set_threshold(*SOLVER_GC_THRESHOLDS)
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)

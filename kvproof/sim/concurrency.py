"""An alias of :mod:`kvproof.formulas.concurrency`, where these formulas now live.

The name stays for the modules that still import ``kvproof.sim.concurrency``:
kvproof/solver/expression.py (``concurrency`` is one of its expression language's formula modules).
It is the very module object (not a re-export), so each function's ``__module__`` is the module the
expression language finds it in. New code imports ``kvproof.formulas.concurrency``.
"""

import sys

from ..formulas import concurrency

sys.modules[__name__] = concurrency

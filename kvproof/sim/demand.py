"""An alias of :mod:`kvproof.formulas.blocks_per_request`, where these formulas now live.

The name stays for the modules that still import ``kvproof.sim.demand``:
kvproof/solver/expression.py (``demand`` is one of its expression language's formula modules),
kvproof/solver/claims/profile.py, kvproof/commands/plan.py and kvproof/fuzz/explained.py. It is the
very module object (not a re-export), so each function's ``__module__`` is the module the expression
language finds it in. New code imports ``kvproof.formulas.blocks_per_request``.
"""

import sys

from ..formulas import blocks_per_request

sys.modules[__name__] = blocks_per_request

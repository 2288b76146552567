"""An alias of :mod:`kvproof.formulas.pages`, where these formulas now live.

The name stays for the modules that still import ``kvproof.sim.pages``: kvproof/solver/expression.py
(``pages`` is one of its expression language's formula modules). It is the very module object (not a
re-export), so each function's ``__module__`` is the module the expression language finds it in. New
code imports ``kvproof.formulas.pages``.
"""

import sys

from ..formulas import pages

sys.modules[__name__] = pages

"""The formulas floor: vLLM 0.33.0's arithmetic, written once for the simulator and the rules.

Every function here is written with the :mod:`kvproof.logic` helpers, so the same function runs
on plain Python values (``kvproof simulate``, the checker) and on z3 terms (the solver, the
parity fuzzer): no Python control flow on a value that may be symbolic. Where the checker's speed
needs it, a formula keeps one plain-Python fast path behind :func:`kvproof.logic.concrete`, and
``tests/formulas`` proves the fast path and the helper expression agree.

=============================  ==============================================================
module                         what it computes
=============================  ==============================================================
``dtypes``                     the one dtype table: bytes per element of a torch dtype name
``select``                     ``values[index]`` for an index that may be a z3 term
``pages``                      page sizes per spec class (attention, MLA, indexer, Mamba-like
                               state), padding, uniform-type groups, layer block strides
``kernel_blocks``              kernel blocks of a manager block, the length of a view's block
                               axis, kernel block ids (the kernel-block views)
``view_extents``               bytes one manager block of a view spans, its dense bytes, and
                               whether its dimensions overlap
``placement``                  byte ranges of tensor allocations and pages in the backing
``pool``                       bytes per block, ``num_blocks`` and tensor sizes of the pool
``blocks_per_request``         blocks one request needs at ``max_model_len`` per group kind
``concurrency``                start-up concurrency and capacity in tokens
=============================  ==============================================================

The floor imports only :mod:`kvproof.logic`; :mod:`kvproof.sim` and :mod:`kvproof.rules` import
it (docs/design.md).
"""

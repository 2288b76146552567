"""The ``kvproof`` command (the console script, and ``python -m kvproof``): the CLI as a short-lived
process. Two costs of a Python process that a command pays for nothing are cut here (measured
by ``bench/bench_check.py``, the whole process against ``python -c json.load``):

* the cyclic garbage collector is off while the process starts (imports and parsing make no
  garbage cycles; the collector walked the growing heap of imported modules) and for a whole
  ``check``, whose documents stay alive until the report is written
  (:func:`kvproof.cli.main` turns it on again for every other command);
* after a ``check``, the interpreter's teardown (every module and object freed one by one, ~15
  ms) is skipped: the exit handlers run and the standard streams are flushed, then the process
  ends (:func:`exit_now`). Every other command, and a check under a profiler or a tracer
  (``python -m cProfile -m kvproof``, a debugger), exits as Python does.
"""

import gc
import sys


def entry() -> None:
    gc.disable()
    from .cli import Startup, main

    startup = Startup(gc_paused=True)
    code = main(startup=startup)
    if startup.command == "check" and sys.getprofile() is None and sys.gettrace() is None:
        exit_now(code)
    sys.exit(code)


def exit_now(code: int) -> None:
    """End the process with ``code`` as ``sys.exit`` would, without the interpreter's teardown:
    the ``atexit`` handlers (and ``weakref.finalize`` callbacks kept for exit) run first, then
    stdout and stderr are flushed. A live non-daemon thread would be joined by a normal exit, so
    then the normal exit is taken."""
    import atexit
    import os
    import threading

    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or vanished stream: nothing left to say there
            pass
    os._exit(code if isinstance(code, int) else 1)


if __name__ == "__main__":
    entry()

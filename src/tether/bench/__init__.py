"""tether.bench: the task performance suite (the seed's TaPS).

Any application runs on any executor, with any data transformer and filter, from one
command line (``tether bench run``) and TOML configuration; every task leaves a record.

* :mod:`tether.bench.engine`: :class:`~tether.bench.engine.Engine`, task futures,
  ``as_completed``/``wait``.
* :mod:`tether.bench.executor`: executor configs (thread and process pools, Dask, Parsl,
  Ray) and :class:`~tether.bench.executor.future_dependency.FutureDependencyExecutor`.
* :mod:`tether.bench.transformer` and :mod:`tether.bench.filter`: data transformers
  (pickle files, tether stores) and the filters that pick what they transform.
* :mod:`tether.bench.record`: task records; :mod:`tether.bench.logging`: run logs.
* :mod:`tether.bench.apps`: the applications; :mod:`tether.bench.registry`: the registry.
* :mod:`tether.bench.run`: configuration, run directories and the command line;
  :mod:`tether.bench.plot`: figures from run directories.
"""

from __future__ import annotations

__all__: list[str] = []

"""Integrations of tether stores with task execution engines.

* :mod:`tether.plugins.dask`: a drop-in ``dask.distributed.Client`` that passes large
  task inputs and results by proxy.
* :mod:`tether.plugins.ray`: a ``concurrent.futures`` executor over Ray tasks, to wrap in
  :class:`~tether.store.executor.StoreExecutor`.

Parsl needs no plugin: wrap ``parsl.concurrent.ParslPoolExecutor`` in a ``StoreExecutor``.
Each module imports its engine only when it is imported itself.
"""

from __future__ import annotations

__all__: list[str] = []

"""Integrations of tether stores with task execution engines.

* :mod:`tether.plugins.dask`: a drop-in ``dask.distributed.Client`` that passes large
  task inputs and results by proxy.
* :mod:`tether.plugins.ray`: a ``concurrent.futures`` executor over Ray tasks, to wrap in
  :class:`~tether.store.executor.StoreExecutor`.

* :mod:`tether.plugins.parsl`: ``ParslPoolExecutor`` whose tasks can return proxies, and
  tether's one Parsl integration (local HTEX config on loopback, kernel start and stop,
  apps) used by the bench executor, the steering task server, the agents' launcher and
  the faas engine.
Each module imports its engine only when it is imported itself.
"""

from __future__ import annotations

__all__: list[str] = []

"""The old name of :mod:`tether.bench.registry`, kept so that its imports still work.

In tether, "plugins" means the framework integrations of :mod:`tether.plugins`; the bench
registry of apps, executors, transformers and filters is :mod:`tether.bench.registry`.
The entry-point group of third-party bench components keeps its name,
``tether.bench.plugins``.
"""

from __future__ import annotations

from tether.bench.registry import *  # noqa: F403 (the same names, the same objects)
from tether.bench.registry import __all__  # noqa: F401 (re-exported)

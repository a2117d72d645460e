"""The old home of :class:`FutureDependencyExecutor`, kept so that its imports still work.

It lives in :mod:`tether.bench.executor.future_dependency`; import it from there.
"""

from __future__ import annotations

from tether.bench.executor.future_dependency import (
    FutureDependencyExecutor,
    find_futures,
    substitute_futures,
)

__all__ = ['FutureDependencyExecutor', 'find_futures', 'substitute_futures']

"""The old name of :mod:`tether.stream.hooks`, kept so that its imports still work.

In tether, "plugins" means the framework integrations of :mod:`tether.plugins`; the
filters, samplers and aggregators of streams are :mod:`tether.stream.hooks`.
"""

from __future__ import annotations

from tether.stream.hooks import *  # noqa: F403 (the same names, the same objects)
from tether.stream.hooks import __all__  # noqa: F401 (re-exported)

"""Mixin that makes a connector a context manager (``with Connector(...) as c:``).

The one implementation is :class:`tether._closing.ClosingContext`; this name stays for
the connectors that import it from here.
"""

from __future__ import annotations

from tether._closing import ClosingContext

__all__ = ['ClosingContext']

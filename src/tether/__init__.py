"""tether: pass-by-reference data flow for distributed Python.

The package root stays light: import what you use from its module, for example
:mod:`tether.proxy`, :mod:`tether.store`, :mod:`tether.connectors.redis`.
"""

from __future__ import annotations

__all__ = ['__version__']

__version__ = '0.1.0'

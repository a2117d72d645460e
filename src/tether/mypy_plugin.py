"""mypy plugin: type-check ``Proxy[T]`` as ``T``.

Enable it in your mypy configuration::

    [tool.mypy]
    plugins = ["tether.mypy_plugin"]

Without the plugin, every attribute of a ``Proxy[T]`` is ``Any`` (the proxy forwards
attribute access at run time). With it, attribute access and method calls on a
``Proxy[T]`` are checked against ``T``: ``Proxy[str]`` has ``.upper()`` returning ``str``,
and ``Proxy[str].nonexistent`` is an error. Operators and special methods (``+``,
``len()``, ``==``, iteration) are typed ``Any``, as at run time they forward too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from mypy.checkmember import analyze_member_access
from mypy.plugin import AttributeContext, Plugin
from mypy.types import AnyType, Instance, Type, get_proper_type

__all__ = ['ProxyPlugin', 'plugin']

# The class is defined in a private module and re-exported by tether.proxy.
_PROXY = 'tether._proxy_core.Proxy'
_PROXY_NAMES = frozenset((_PROXY, 'tether.proxy.Proxy'))


def _proxy_attribute(name: str, ctx: AttributeContext) -> Type:
    obj = get_proper_type(ctx.type)
    if not isinstance(obj, Instance) or obj.type.fullname not in _PROXY_NAMES or not obj.args:
        return ctx.default_attr_type
    if not isinstance(get_proper_type(ctx.default_attr_type), AnyType):
        # A name the proxy itself defines (its internals, __class__ ...).
        return ctx.default_attr_type
    target = get_proper_type(obj.args[0])
    if isinstance(target, AnyType):
        return ctx.default_attr_type
    return analyze_member_access(
        name,
        target,
        ctx.context,
        is_lvalue=ctx.is_lvalue,
        is_super=False,
        is_operator=False,
        original_type=target,
        chk=ctx.api,  # type: ignore[arg-type]
    )


class ProxyPlugin(Plugin):
    """Resolves the attributes of ``Proxy[T]`` on ``T``."""

    def get_attribute_hook(self, fullname: str) -> Callable[[AttributeContext], Type] | None:
        """Return the hook for attributes of :class:`tether.proxy.Proxy`."""
        prefix, _, name = fullname.rpartition('.')
        if prefix in _PROXY_NAMES and not name.startswith('__proxy_'):
            return functools.partial(_proxy_attribute, name)
        return None


def plugin(version: str) -> type[Plugin]:
    """Entry point mypy calls."""
    return ProxyPlugin

"""mypy plugin: type-check ``Proxy[T]`` as ``T``.

Enable it in your mypy configuration::

    [tool.mypy]
    plugins = ["tether.mypy_plugin"]

With it, attribute access and method calls on a ``Proxy[T]`` are checked against ``T``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mypy.plugin import AttributeContext, Plugin
from mypy.types import AnyType, Instance, Type, TypeOfAny, get_proper_type

__all__ = ['ProxyPlugin', 'plugin']

_PROXY = 'tether.proxy.Proxy'


def _proxy_attribute(ctx: AttributeContext) -> Type:
    obj = get_proper_type(ctx.type)
    if not isinstance(obj, Instance) or obj.type.fullname != _PROXY or not obj.args:
        return ctx.default_attr_type
    target = get_proper_type(obj.args[0])
    if isinstance(target, AnyType):
        return AnyType(TypeOfAny.implementation_artifact)
    name = ctx.context.name if hasattr(ctx.context, 'name') else None
    if name is None:
        return ctx.default_attr_type
    import inspect

    from mypy.checkmember import analyze_member_access

    kwargs: dict[str, Any] = {}
    if 'msg' in inspect.signature(analyze_member_access).parameters:
        kwargs['msg'] = ctx.api.msg  # mypy < 1.16 takes the message builder separately
    return analyze_member_access(
        name,
        target,
        ctx.context,
        is_lvalue=False,
        is_super=False,
        is_operator=False,
        original_type=target,
        chk=ctx.api,  # type: ignore[arg-type]
        in_literal_context=False,
        **kwargs,
    )


class ProxyPlugin(Plugin):
    """Resolves attributes of ``Proxy[T]`` on ``T``."""

    def get_attribute_hook(self, fullname: str) -> Callable[[AttributeContext], Type] | None:
        if fullname.startswith(f'{_PROXY}.'):
            return _proxy_attribute
        return None


def plugin(version: str) -> type[Plugin]:
    """Entry point mypy calls."""
    return ProxyPlugin

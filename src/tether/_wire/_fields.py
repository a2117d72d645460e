"""Reading one field of a received header: checked once, with a clear error.

Every decoder of a message kind (the handshake's, the object servers', the relay's, the
function service's) reads its header through :func:`field`, so that a malformed or
hostile header is refused with a :class:`~tether.exceptions.ProtocolError` naming the
message and the field, never a ``KeyError`` or ``TypeError`` deep in the code that
handles it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tether.exceptions import ProtocolError

__all__ = ['field', 'optional']


def _wrong(value: Any, kind: type | tuple[type, ...]) -> bool:
    if isinstance(value, bool):  # JSON true is not a number
        return not (kind is bool or (isinstance(kind, tuple) and bool in kind))
    return not isinstance(value, kind)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return ' or '.join(k.__name__ for k in kinds)


def field(header: Mapping[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    """The value of the required field ``name`` of ``what``'s header, of type ``kind``.

    Raises:
        ProtocolError: the field is missing or of another type (``bool`` is not taken
            for a number).
    """
    try:
        value = header[name]
    except KeyError:
        raise ProtocolError(f'{what} without the field {name!r}') from None
    if _wrong(value, kind):
        raise ProtocolError(
            f'{what}: field {name!r} must be {_kind_name(kind)}, got {type(value).__name__}'
        )
    return value


def optional(
    header: Mapping[str, Any],
    name: str,
    kind: type | tuple[type, ...],
    what: str,
    default: Any = None,
) -> Any:
    """The value of the optional field ``name`` (``default`` if missing or ``null``).

    Raises:
        ProtocolError: the field is present and of another type.
    """
    value = header.get(name)
    if value is None:
        return default
    if _wrong(value, kind):
        raise ProtocolError(
            f'{what}: field {name!r} must be {_kind_name(kind)}, got {type(value).__name__}'
        )
    return value

"""The peering offer and its answer: what two endpoints tell each other through the relay.

The relay passes both on as JSON objects (see :mod:`tether._serve.signalling`); the
endpoints read them as the typed, frozen records :class:`PathOffer` and
:class:`PathAnswer`, checked once by :func:`decode_offer` and :func:`decode_answer`.
:func:`encode` is the other way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from tether._wire._fields import field, optional
from tether.exceptions import ProtocolError

__all__ = ['PathAnswer', 'PathOffer', 'decode_answer', 'decode_offer', 'encode']


class PathOffer(NamedTuple):
    """The initiator's offer.

    Attributes:
        session: The peering session (hex; names the UDP mapping and a relayed tunnel).
        secret: The channel's shared secret (hex).
        cert: The initiator's certificate (PEM), pinned by the other side.
        direct: Addresses it listens on for peers (``host:port``).
        nat: Its NAT type (``open``, ``cone``, ``symmetric`` ... or ``unknown``).
        paths: The paths it allows, in its order of preference.
        udp: Its public UDP mapping ``[ip, port]`` for a punched path (``None``: none).
        tcp: Its public TCP mapping ``[ip, port]`` for a punched TCP path.
    """

    session: str
    secret: str
    cert: str
    direct: list[str]
    nat: str
    paths: list[str]
    udp: list[Any] | None = None
    tcp: list[Any] | None = None


class PathAnswer(NamedTuple):
    """The other side's answer (fields as in :class:`PathOffer`)."""

    cert: str
    direct: list[str]
    nat: str
    udp: list[Any] | None = None
    tcp: list[Any] | None = None


def encode(message: PathOffer | PathAnswer) -> dict[str, Any]:
    """The JSON object of an offer or an answer."""
    return {k: v for k, v in zip(message._fields, message, strict=True) if v is not None}


def _strings(h: Mapping[str, Any], name: str, what: str) -> list[str]:
    value: list[Any] = optional(h, name, list, what, [])
    if not all(isinstance(v, str) for v in value):
        raise ProtocolError(f'{what}: field {name!r} must be a list of strings')
    return value


def _mapping(h: Mapping[str, Any], name: str, what: str) -> list[Any] | None:
    value: list[Any] | None = optional(h, name, list, what)
    if value is not None and (
        len(value) != 2 or not isinstance(value[0], str) or type(value[1]) is not int
    ):
        raise ProtocolError(f'{what}: field {name!r} must be [ip, port]')
    return value


def _hex(h: Mapping[str, Any], name: str, what: str) -> str:
    value: str = field(h, name, str, what)
    try:
        bytes.fromhex(value)
    except ValueError:
        raise ProtocolError(f'{what}: field {name!r} must be hexadecimal') from None
    return value


def decode_offer(h: Mapping[str, Any]) -> PathOffer:
    """The record of an offer.

    Raises:
        ProtocolError: a field is missing or malformed.
    """
    what = 'peering offer'
    return PathOffer(
        _hex(h, 'session', what),
        _hex(h, 'secret', what),
        field(h, 'cert', str, what),
        _strings(h, 'direct', what),
        optional(h, 'nat', str, what, 'unknown'),
        _strings(h, 'paths', what),
        _mapping(h, 'udp', what),
        _mapping(h, 'tcp', what),
    )


def decode_answer(h: Mapping[str, Any]) -> PathAnswer:
    """The record of an answer.

    Raises:
        ProtocolError: a field is missing or malformed.
    """
    what = 'peering answer'
    return PathAnswer(
        field(h, 'cert', str, what),
        _strings(h, 'direct', what),
        optional(h, 'nat', str, what, 'unknown'),
        _mapping(h, 'udp', what),
        _mapping(h, 'tcp', what),
    )

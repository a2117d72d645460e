"""Signing keys and replay protection: the one implementation behind tether.stream's
stream keys and tether.steer's queue keys (internal).

* :class:`SigningKey`: a shared secret of at least :data:`MIN_KEY_BYTES` bytes that never
  leaves the process (not picklable; its ``repr`` shows only its key id).
* :func:`resolve`: a ``key=``/``secret=`` argument resolved as both document it: the
  argument, else ``$<ENV>``, else ``$<ENV>_FILE``, else the user's key file
  (:mod:`tether._keyfile`).
* :class:`Sequencer`: per-channel sequence numbers of one sender, whose id is renewed in a
  forked child (a forked child is another sender).
* :class:`ReplayWindow`: which ``(sender, channel, seq)`` were accepted, within a window
  below the newest per sender and channel, bounded in senders remembered.

The two latter hold no lock: their owner calls them under its own.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import math
import os
import secrets
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from tether import _keyfile
from tether.exceptions import ConfigError

__all__ = ['MIN_KEY_BYTES', 'ReplayWindow', 'Sequencer', 'SigningKey', 'Spec', 'resolve']

MIN_KEY_BYTES = 16

Spec = str | bytes | Literal[False] | None
"""A key argument: the key, ``None`` (from the environment) or ``False`` (none)."""

K = TypeVar('K', bound='SigningKey')


class SigningKey:
    """A shared secret that never leaves the process.

    Subclasses name what the key is for (:attr:`what`, in errors) and the label its key id
    is derived with (:attr:`kid_label`: two uses of one secret get different key ids).
    """

    __slots__ = ('_base', 'kid')

    what: ClassVar[str] = 'signing key'
    kid_label: ClassVar[bytes] = b'tether-key-id'

    def __init__(self, secret: str | bytes) -> None:
        raw = secret.encode() if isinstance(secret, str) else bytes(secret)
        if len(raw) < MIN_KEY_BYTES:
            raise ConfigError(
                f'a {self.what} must have at least {MIN_KEY_BYTES} bytes (got {len(raw)}); '
                'generate one with `python -c "import secrets; print(secrets.token_hex(32))"`',
            )
        self._base = hmac.new(raw, digestmod=hashlib.sha256)  # keyed once, copied per MAC
        self.kid = hmac.new(raw, self.kid_label, hashlib.sha256).hexdigest()[:16]

    def __repr__(self) -> str:
        return f'{type(self).__name__}(kid={self.kid!r})'

    def __reduce__(self) -> Any:
        raise TypeError(f'a {self.what} is never serialized: resolve it in each process')

    def digest(self, *parts: bytes | memoryview) -> bytes:
        """``HMAC-SHA256(key, concatenation of parts)``."""
        h = self._base.copy()
        for part in parts:
            h.update(part)
        return h.digest()

    def hexdigest(self, data: bytes) -> str:
        """``HMAC-SHA256(key, data)`` in hex."""
        h = self._base.copy()
        h.update(data)
        return h.hexdigest()


def resolve(
    spec: Spec | SigningKey,
    key_type: type[K],
    *,
    env: str,
    env_file: str,
    default_file: Path,
    instead: str,
) -> K | None:
    """Resolve a key argument: itself, else ``$env``, else ``$env_file``, else the user's
    key file ``default_file`` (created on first use; ``instead`` says what to do when it
    cannot be).

    Raises:
        ConfigError: the key is too short or of the wrong type, or a key file cannot be
            read or created.
    """
    if spec is False:
        return None
    if isinstance(spec, key_type):
        return spec
    if spec is not None:
        if not isinstance(spec, str | bytes):
            raise ConfigError(
                f'a {key_type.what} must be bytes, a string, None or False, not '
                f'{type(spec).__name__}',
            )
        return key_type(spec)
    value = os.environ.get(env)
    if value:
        return key_type(value)
    path = os.environ.get(env_file)
    if path:
        return key_type(_keyfile.read_named(path, key_type.what, env_file))
    return key_type(_keyfile.user_key(default_file, what=key_type.what, instead=instead))


def header_fields(
    header: dict[str, Any], names: tuple[str, str, str]
) -> tuple[str, str, str, int, float] | None:
    """The fields of a signed message's header, checked; ``None`` if one is malformed.

    They are the three string fields ``names`` (the sender, channel and kind, in the
    caller's order and spelling), then ``seq`` (its
    :class:`Sequencer` number, an int >= 0) and ``time`` (when it was sent, finite).
    """
    get = header.get
    first, second, third = get(names[0]), get(names[1]), get(names[2])
    seq, sent = get('seq'), get('time')
    if (
        not isinstance(first, str)
        or not isinstance(second, str)
        or not isinstance(third, str)
        or not isinstance(seq, int)
        or isinstance(seq, bool)
        or seq < 0
        or not isinstance(sent, int | float)
        or not math.isfinite(sent)
    ):
        return None
    return first, second, third, seq, sent


class Sequencer:
    """Numbers one sender's messages per channel; a forked child is a new sender.

    Args:
        id_bytes: Random bytes in a sender id (shown in hex).
    """

    __slots__ = ('_id_bytes', '_pid', '_seq', 'sender')

    def __init__(self, id_bytes: int = 16) -> None:
        self._id_bytes = id_bytes
        self._pid = -1
        self.sender = ''
        self._seq: dict[str, int] = {}

    def next(self, channel: str) -> int:
        """The next sequence number on ``channel`` (renewing :attr:`sender` after a fork)."""
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self.sender = secrets.token_hex(self._id_bytes)
            self._seq = {}
        seq = self._seq.get(channel, 0)
        self._seq[channel] = seq + 1
        return seq


class ReplayWindow:
    """Accepts each ``(sender, channel, seq)`` once.

    Args:
        window: Numbers accepted below the newest seen per sender and channel.
        max_senders: Sender-channel pairs remembered (least recently used forgotten).
    """

    __slots__ = ('_seen', 'max_senders', 'window')

    def __init__(self, window: int = 4096, max_senders: int = 10_000) -> None:
        if window < 1 or max_senders < 1:
            raise ValueError('window and max_senders must be at least 1')
        self.window = window
        self.max_senders = max_senders
        self._seen: collections.OrderedDict[tuple[str, str], tuple[int, set[int]]] = (
            collections.OrderedDict()
        )

    def accept(self, sender: str, channel: str, seq: int) -> bool:
        """Record ``seq``; False if it was accepted before or is too far behind."""
        ident = (sender, channel)
        highest, seen = self._seen.pop(ident, (-1, set()))
        if seq in seen or seq <= highest - self.window:
            self._seen[ident] = (highest, seen)
            return False
        seen.add(seq)
        highest = max(highest, seq)
        if len(seen) > 2 * self.window:  # amortized: prune once per window messages
            seen = {s for s in seen if s > highest - self.window}
        self._seen[ident] = (highest, seen)
        while len(self._seen) > self.max_senders:
            self._seen.popitem(last=False)
        return True

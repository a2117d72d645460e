"""Signed queue messages: the queue key, the envelope, and replay protection.

Queue messages are pickles, so by default every message is signed and checked before
anything in it is unpickled. The key is a shared secret of at least 16 bytes, resolved
where the queues are used and never serialized:

1. the ``secret=`` argument of the queues (``secret=False``: unsigned messages, for
   queues that only trusted parties can write to);
2. else ``$TETHER_STEER_KEY`` (the key itself);
3. else ``$TETHER_STEER_KEY_FILE`` (a file holding the key; surrounding whitespace is
   ignored);
4. else the user's key file, ``$XDG_CONFIG_HOME/tether/steer.key`` (by default
   ``~/.config/tether/steer.key``), created on first use with a random key, mode 0600
   (see :mod:`tether._keyfile`, shared with tether.stream's key file). The Thinker and
   its task server, run by the same user on hosts that share the home directory, sign
   and check with the same key without any configuration.

A signed message is::

    b'TSQ2' | HMAC-SHA256 tag (32 bytes) | header length (u32) | header (JSON) | body

The tag covers everything after it. The header names the key (``kid``, a hash of it),
the queue and channel the message was sent to (``ch``: the Redis prefix or pipe pair,
and ``requests`` or ``result/<topic>``), what it is (a task, a result or the kill
signal), its sender (a random id per process and queue object, renewed in a forked
child), a sequence number per sender and channel, and the time it was sent. A reader
checks the tag first, then that the message was read from the channel it was sent to
(a message replayed onto another topic or another campaign's queue is refused), that it
is not older than ``max_age``, and that its sequence number was not accepted before (a
message replayed twice is refused; numbers more than ``window`` below the newest of
that sender are refused too). A reader that restarts forgets what it saw: ``max_age``
bounds the replays it would accept.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import os
import struct
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from tether import _keyfile, _keys
from tether._keys import MIN_KEY_BYTES, ReplayWindow, Sequencer, SigningKey
from tether._keys import Spec as SecretSpec  # what ``secret=`` accepts
from tether.exceptions import SteerAuthenticationError, SteerReplayError

__all__ = [
    'ENV_KEY',
    'ENV_KEY_FILE',
    'MIN_KEY_BYTES',
    'QueueKey',
    'SecretSpec',
    'Sealer',
    'default_key_file',
    'resolve_secret',
]

ENV_KEY = 'TETHER_STEER_KEY'
ENV_KEY_FILE = 'TETHER_STEER_KEY_FILE'

SIGNED = b'TSQ2'
_TAG = 32
_HLEN = struct.Struct('<I')
_MAX_HEADER = 4096


class QueueKey(SigningKey):
    """A queue key: a secret that never leaves the process.

    It cannot be pickled; its ``repr`` shows only its key id (a hash, harmless to log).
    """

    __slots__ = ()

    what = 'queue key'
    kid_label = b'tether-steer-key-id'

    def tag(self, *parts: bytes | memoryview) -> bytes:
        """``HMAC-SHA256(key, concatenation of parts)``."""
        return self.digest(*parts)


def default_key_file() -> Path:
    """The user's queue key file: ``$XDG_CONFIG_HOME/tether/steer.key``."""
    return _keyfile.config_dir() / 'steer.key'


def resolve_secret(secret: SecretSpec) -> QueueKey | None:
    """Resolve ``secret=`` as documented above: argument, environment, key file.

    Raises:
        ConfigError: the key is too short, or the key file cannot be read or created.
    """
    return _keys.resolve(
        secret,
        QueueKey,
        env=ENV_KEY,
        env_file=ENV_KEY_FILE,
        default_file=default_key_file(),
        instead=(
            f'set ${ENV_KEY} or ${ENV_KEY_FILE}, or pass secret=False to the queues to '
            'send unsigned messages'
        ),
    )


_sealers: weakref.WeakSet[Sealer] = weakref.WeakSet()


def _new_locks_after_fork() -> None:
    # A task server is forked from the Thinker's process: a lock another thread held at
    # that moment must not stay held forever in the child.
    for sealer in list(_sealers):
        sealer._lock = threading.Lock()


os.register_at_fork(after_in_child=_new_locks_after_fork)


@dataclasses.dataclass(eq=False, repr=False)
class Sealer:
    """Signs the messages one queue object sends and checks those it reads.

    Args:
        key: The queue key.
        max_age: Oldest message accepted, in seconds (``None``: no limit).
        window: Sequence numbers accepted below the newest seen per sender and channel.
        max_senders: Sender-channel pairs remembered (least recently used forgotten).
    """

    key: QueueKey
    _: dataclasses.KW_ONLY
    max_age: float | None = None
    window: int = 4096
    max_senders: int = 10_000

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._sequencer = Sequencer(8)
        self._window = ReplayWindow(self.window, self.max_senders)
        _sealers.add(self)

    def seal(self, channel: str, kind: str, body: bytes) -> bytes:
        """Return the signed message carrying ``body`` to ``channel``."""
        with self._lock:
            seq = self._sequencer.next(channel)  # a forked child is another sender
            sender = self._sequencer.sender
        header = json.dumps(
            {
                'kid': self.key.kid,
                'ch': channel,
                'kind': kind,
                'from': sender,
                'seq': seq,
                'time': time.time(),
            },
            separators=(',', ':'),
        ).encode()
        head = _HLEN.pack(len(header)) + header
        return b''.join((SIGNED, self.key.tag(head, body), head, body))

    def open(self, message: bytes, channel: str, where: str) -> tuple[str, memoryview]:
        """Check a signed message read from ``channel``; return its kind and body.

        Raises:
            SteerAuthenticationError: the tag does not match (altered, another key).
            SteerReplayError: it was sent to another channel, is too old, or was read
                before.
        """
        view = memoryview(message)
        if len(view) < len(SIGNED) + _TAG + _HLEN.size:
            raise SteerAuthenticationError(f'refused a message on {where}: truncated')
        tag = view[len(SIGNED) : len(SIGNED) + _TAG]
        rest = view[len(SIGNED) + _TAG :]
        if not hmac.compare_digest(bytes(tag), self.key.tag(rest)):
            raise SteerAuthenticationError(
                f'refused a message on {where}: its signature does not match (it was '
                f'altered, or signed with another queue key: {_claimed_kid(rest)}; this side '
                f'uses key id {self.key.kid!r}). Give both sides the same secret=, '
                f'${ENV_KEY}, or the same user key file',
            )
        (hlen,) = _HLEN.unpack_from(rest, 0)
        if hlen > _MAX_HEADER or _HLEN.size + hlen > len(rest):
            raise SteerAuthenticationError(f'refused a message on {where}: malformed header')
        try:
            header = json.loads(bytes(rest[_HLEN.size : _HLEN.size + hlen]))
        except ValueError as e:
            raise SteerAuthenticationError(
                f'refused a message on {where}: malformed header ({e})',
            ) from None
        self._check(header, channel, where)
        return str(header['kind']), rest[_HLEN.size + hlen :]

    def _check(self, header: Any, channel: str, where: str) -> None:
        if not isinstance(header, dict):
            raise SteerAuthenticationError(f'refused a message on {where}: malformed header')
        fields = _keys.header_fields(header, ('ch', 'kind', 'from'))
        if fields is None:
            raise SteerAuthenticationError(
                f'refused a message on {where}: malformed header {header!r}',
            )
        sent_to, _kind, sender, seq, sent = fields
        if sent_to != channel:
            raise SteerReplayError(
                f'refused a replayed message on {where}: it was signed for {sent_to!r}, not '
                f'for {channel!r} (a message copied onto another topic or queue)',
            )
        age = time.time() - sent
        if self.max_age is not None and age > self.max_age:
            raise SteerReplayError(
                f'refused a message on {where}: it was sent {age:.0f} s ago (max_age='
                f'{self.max_age} s)',
            )
        with self._lock:
            if not self._window.accept(sender, channel, seq):
                raise SteerReplayError(
                    f'refused a replayed message on {where}: message {seq} of sender '
                    f'{sender} was already read (or is more than {self.window} behind the '
                    'newest)',
                )


def _claimed_kid(rest: memoryview) -> str:
    """The key id an unverified message claims, for error messages only."""
    try:
        (hlen,) = _HLEN.unpack_from(rest, 0)
        kid = json.loads(bytes(rest[_HLEN.size : _HLEN.size + min(hlen, _MAX_HEADER)]))['kid']
    except (ValueError, KeyError, TypeError, struct.error):
        kid = None
    if isinstance(kid, str):
        return f'it claims key id {kid[:32]!r}'
    return 'it names no key id'

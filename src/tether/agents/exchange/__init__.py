"""Exchanges host mailboxes: agents and clients send and receive messages through them.

* :class:`ThreadExchange`: in this process's memory (agents in threads, tests);
* :class:`RedisExchange`: mailboxes are Redis lists that persist while agents are away;
* :class:`HybridExchange`: direct authenticated connections between processes, Redis for
  discovery and as the fallback.

An exchange implements :class:`Exchange` (``key()`` and ``make_transport()``), its
:class:`Transport` and :class:`Listener`; every exchange passes one conformance suite,
:class:`tether.testing.agents.ExchangeConformance`. The contracts are also named in
:mod:`tether.abc`.
"""

from __future__ import annotations

from tether.agents.exchange._base import (
    Deliver,
    Exchange,
    Listener,
    MailboxStatus,
    Transport,
    new_mailbox_id,
)
from tether.agents.exchange.hybrid import HybridExchange
from tether.agents.exchange.redis import RedisExchange
from tether.agents.exchange.thread import ThreadExchange

__all__ = [
    'Deliver',
    'Exchange',
    'HybridExchange',
    'Listener',
    'MailboxStatus',
    'RedisExchange',
    'ThreadExchange',
    'Transport',
    'new_mailbox_id',
]

"""Exchanges host mailboxes: agents and clients send and receive messages through them.

* :class:`ThreadExchange`: in this process's memory (agents in threads, tests);
* :class:`RedisExchange`: mailboxes are Redis lists that persist while agents are away;
* :class:`HybridExchange`: direct authenticated connections between processes, Redis for
  discovery and as the fallback.

Every exchange passes one conformance suite (``tests/agents/test_exchange_conformance.py``).
"""

from __future__ import annotations

from tether.agents.exchange._base import Exchange, MailboxStatus, Transport, new_mailbox_id
from tether.agents.exchange.hybrid import HybridExchange
from tether.agents.exchange.redis import RedisExchange
from tether.agents.exchange.thread import ThreadExchange

__all__ = [
    'Exchange',
    'HybridExchange',
    'MailboxStatus',
    'RedisExchange',
    'ThreadExchange',
    'Transport',
    'new_mailbox_id',
]

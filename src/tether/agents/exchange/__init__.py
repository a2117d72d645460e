"""Exchanges host mailboxes: agents and clients send and receive messages through them.

* :class:`ThreadExchange`: in this process's memory (agents in threads, tests);
* :class:`RedisExchange`: mailboxes are Redis lists that persist while agents are away;
* :class:`HybridExchange`: direct authenticated connections between processes, Redis for
  discovery and as the fallback;
* :class:`HttpExchange`: a client of a hosted exchange (:mod:`.hosted`), many users over
  WebSocket.

academy-py 1.0's factories name these exchanges (:class:`LocalExchangeFactory`,
:class:`RedisExchangeFactory`, :class:`HybridExchangeFactory`,
:class:`HttpExchangeFactory`) and make
:class:`UserExchangeClient` objects for :class:`tether.agents.aio.Manager`.

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
from tether.agents.exchange.factory import (
    AgentRegistration,
    AgentStats,
    ExchangeFactory,
    HybridExchangeFactory,
    LocalExchangeFactory,
    RedisExchangeFactory,
    UserExchangeClient,
)
from tether.agents.exchange.http import HttpExchange, HttpExchangeFactory
from tether.agents.exchange.hybrid import HybridExchange
from tether.agents.exchange.redis import RedisExchange
from tether.agents.exchange.thread import ThreadExchange

__all__ = [
    'AgentRegistration',
    'AgentStats',
    'Deliver',
    'Exchange',
    'ExchangeFactory',
    'HttpExchange',
    'HttpExchangeFactory',
    'HybridExchange',
    'HybridExchangeFactory',
    'Listener',
    'LocalExchangeFactory',
    'MailboxStatus',
    'RedisExchange',
    'RedisExchangeFactory',
    'ThreadExchange',
    'Transport',
    'UserExchangeClient',
    'new_mailbox_id',
]

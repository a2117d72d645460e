"""The exchange protocol: mailboxes, their states, discovery, sending and listening.

An :class:`Exchange` is a small picklable description (a host, a prefix ...). Each
process builds one :class:`Transport` per exchange (the connections, listeners and the
process's shared client mailbox) the first time it needs it; copies of the exchange in
the same process share it, and a forked child builds its own.
"""

from __future__ import annotations

import atexit
import enum
import logging
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from tether._clock import SYSTEM_CLOCK, Clock
from tether.agents._codec import Codec
from tether.agents.behavior import mro_of
from tether.agents.message import (
    Cancel,
    Message,
    Rejected,
    Request,
    Response,
    error_info,
    new_mailbox_id,
)

if TYPE_CHECKING:
    from tether.agents.behavior import Behavior
    from tether.agents.handle import Handle, _ClientMailbox

__all__ = ['Deliver', 'Exchange', 'Listener', 'MailboxStatus', 'Transport', 'new_mailbox_id']

logger = logging.getLogger(__name__)

Deliver = Callable[[Message | Rejected], None]
"""Called with each message a mailbox receives (or a description of one it refused)."""


class MailboxStatus(enum.Enum):
    """State of a mailbox in an exchange."""

    ACTIVE = 'active'
    """Accepts messages, even while its agent is not (yet, or any more) running."""
    TERMINATED = 'terminated'
    """Its entity shut down for good; sending raises MailboxClosedError."""
    MISSING = 'missing'
    """No mailbox of that id exists in this exchange."""


class Listener(ABC):
    """A running receiver for one mailbox.

    Attributes:
        on_lost: Called (no arguments, from the listener's thread) when the listener
            found that the exchange lost its mailbox (a Redis restarted without its
            data) and made it again: the messages that waited in it, and those sent to it
            while it was gone, are lost. ``None``: only logged.
        on_check: Called (no arguments, from the listener's thread) just before the
            listener checks that its mailbox still exists, so that :attr:`on_lost` can
            tell what was sent before the check from what was sent after it.
    """

    on_lost: Callable[[], None] | None = None
    on_check: Callable[[], None] | None = None

    @abstractmethod
    def close(self) -> None:
        """Stop receiving (messages not yet taken stay in the mailbox)."""


class Transport(ABC):
    """What one process uses to talk through one exchange (the transport contract).

    A transport implements :meth:`register`, :meth:`terminate`, :meth:`status`,
    :meth:`discover`, :meth:`send`, :meth:`send_raw` and :meth:`listen` (and
    :meth:`restore` if its mailboxes can vanish); handles, agents and the exchange use
    nothing else.

    Attributes:
        codec: How this process encodes and decodes message values.
        clock: The exchange's clock (set when the exchange builds the transport).
        closed: Whether :meth:`close` was called.
    """

    clock: Clock = SYSTEM_CLOCK

    def __init__(self, codec: Codec) -> None:
        self.codec = codec
        # Why a mailbox is being terminated (see Exchange.terminate), for answer_dropped.
        self._why: dict[str, str] = {}
        self._client: _ClientMailbox | None = None
        self._client_lock = threading.Lock()
        self.closed = False

    @abstractmethod
    def register(self, mailbox_id: str, mro: list[str] | None) -> None:
        """Create (or reopen) an active mailbox; ``mro`` makes it discoverable."""

    @abstractmethod
    def terminate(self, mailbox_id: str) -> None:
        """Close a mailbox for good (later sends raise MailboxClosedError)."""

    def restore(self, mailbox_id: str, mro: list[str] | None) -> bool:
        """Make a mailbox the exchange lost (not one that was terminated) active again.

        Returns:
            Whether it had vanished. Exchanges whose mailboxes cannot vanish return False.
        """
        return False

    @abstractmethod
    def status(self, mailbox_id: str) -> MailboxStatus:
        """The state of a mailbox."""

    @abstractmethod
    def discover(self, type_name: str, allow_subclasses: bool) -> list[str]:
        """Ids of active agent mailboxes whose behavior is ``type_name`` (or a subclass)."""

    @abstractmethod
    def send(self, msg: Message) -> None:
        """Deliver ``msg`` to ``msg.dest`` (or queue it there while its agent is away).

        Raises:
            MailboxClosedError: if the mailbox was terminated.
            UnknownMailboxError: if there is no such mailbox.
        """

    @abstractmethod
    def send_raw(self, dest: str, data: bytes) -> None:
        """Put raw envelope bytes into a mailbox (tests use it to send hostile messages)."""

    @abstractmethod
    def listen(self, mailbox_id: str, deliver: Deliver) -> Listener:
        """Start delivering the mailbox's messages (queued ones first) to ``deliver``."""

    def answer_dropped(self, mailbox_id: str, items: list[Message | Rejected]) -> None:
        """Tell the senders of requests a terminated mailbox still held that they failed.

        Without this, a request that reached a mailbox after its agent stopped taking
        messages (or after the launcher gave up on it) would wait for a reply forever.
        """
        from tether.exceptions import MailboxClosedError, TetherError

        why = self._why.get(mailbox_id)
        for item in items:
            if not isinstance(item, Message) or not _expects_answer(item):
                continue
            what = f'action {item.action!r}' if type(item) is Request else f'{item.kind} request'
            error = MailboxClosedError(
                f'mailbox {mailbox_id} was terminated before its agent took this {what}; '
                'it was not run' + (f' ({why})' if why else ''),
            )
            reply = Response(
                mailbox_id, item.src, item.tag, error=error_info(error, with_pickle=False)
            )
            try:
                self.send(reply)
            except TetherError as e:
                logger.debug('could not answer %s: %s', item.src, e)

    def answer_undeliverable(self, msg: Message, error: BaseException) -> None:
        """Tell the sender of a request that its message could not be delivered."""
        from tether.exceptions import AgentError, TetherError

        if not _expects_answer(msg):
            return
        failure = AgentError(f'could not deliver a {msg.kind} message to {msg.dest}: {error}')
        reply = Response(msg.dest, msg.src, msg.tag, error=error_info(failure, with_pickle=False))
        try:
            self.send(reply)
        except TetherError as e:
            logger.debug('could not answer %s: %s', msg.src, e)

    def client(self) -> _ClientMailbox:
        """This process's client mailbox for this exchange (shared by every handle)."""
        with self._client_lock:
            if self._client is None:
                from tether.agents.handle import _ClientMailbox

                self._client = _ClientMailbox(self)
            return self._client

    def close(self) -> None:
        """Terminate the client mailbox, stop listeners, drop connections."""
        self.closed = True
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


def _expects_answer(msg: Message) -> bool:
    return msg.tag != 0 and type(msg) is not Response and type(msg) is not Cancel


_transports: dict[str, Transport] = {}
_transports_pid = os.getpid()
_transports_lock = threading.Lock()


def _close_all() -> None:
    with _transports_lock:
        items = list(_transports.values())
        _transports.clear()
    for t in items:
        try:
            t.close()
        except Exception:  # pragma: no cover - best effort at exit
            logger.debug('closing an agent transport at exit failed', exc_info=True)


atexit.register(_close_all)


class Exchange(ABC):
    """Hosts mailboxes; agents and clients send and receive messages through it.

    The exchange contract: an exchange implements :meth:`key` and :meth:`make_transport`
    (a :class:`Transport`, which implements the mailbox operations); everything else is
    built on those. Every exchange passes
    :class:`tether.testing.agents.ExchangeConformance`.

    Args:
        allow_pickle: Accept pickled values (arguments, results, exceptions) in messages
            this process receives through this exchange. Off by default: values are
            then limited to native types (see :mod:`tether.agents`).
        clock: The clock of this process's handle timeouts and of the timers of agents
            that run in this process's threads (a copy sent to another process uses the
            system clock).
    """

    _not_pickled: ClassVar[tuple[str, ...]] = ()
    """Attributes a copy sent to another process leaves out (secrets, an open store):
    the copy resolves its own there."""

    _settings: ClassVar[tuple[str, ...]] = ()
    """The constructor's arguments :meth:`config` gives, each kept as an attribute of the
    same name."""

    def __init__(self, *, allow_pickle: bool = False, clock: Clock = SYSTEM_CLOCK) -> None:
        self.allow_pickle = allow_pickle
        self.clock = clock

    def __getstate__(self) -> dict[str, Any]:
        """A copy for another process: none of :attr:`_not_pickled`, the system clock."""
        state = dict(self.__dict__)
        for name in self._not_pickled:
            state[name] = None
        state['clock'] = SYSTEM_CLOCK
        return state

    def config(self) -> dict[str, Any]:
        """What rebuilds this exchange elsewhere: ``type(exchange)(**config)``. Never a
        secret: a copy reads its token, password or key from where ``token_env``,
        ``password_env`` or ``secret_env`` say."""
        return {name: getattr(self, name) for name in self._settings}

    # Identity and the per-process transport ----------------------------------------

    @abstractmethod
    def key(self) -> str:
        """Identifies the exchange: equal keys share one transport per process."""

    @abstractmethod
    def make_transport(self) -> Transport:
        """Build this process's transport for this exchange (called once per process and
        key by :meth:`transport`, which shares it between copies of the exchange)."""

    def transport(self) -> Transport:
        """This process's transport for this exchange (built on first use)."""
        global _transports_pid
        key = self.key()
        with _transports_lock:
            if os.getpid() != _transports_pid:
                # A forked child: the parent's sockets and threads are not ours.
                _transports.clear()
                _transports_pid = os.getpid()
            transport = _transports.get(key)
            if transport is None or transport.closed:
                transport = self.make_transport()
                transport.clock = self.clock
                _transports[key] = transport
            return transport

    def close(self) -> None:
        """Close this process's transport (its client mailbox is terminated)."""
        with _transports_lock:
            transport = _transports.pop(self.key(), None)
        if transport is not None:
            transport.close()

    # Mailboxes ------------------------------------------------------------------------

    def register_agent(self, behavior: type[Behavior], agent_id: str | None = None) -> str:
        """Create the mailbox of an agent with that behavior and return its id."""
        mailbox_id = agent_id or new_mailbox_id('agent')
        self.transport().register(mailbox_id, mro_of(behavior))
        return mailbox_id

    def register_client(self) -> str:
        """Create a client mailbox (not discoverable) and return its id.

        On the Redis and hybrid exchanges a client mailbox lives while a listener of its
        process refreshes it: one nobody listens to expires after 60 s.
        """
        mailbox_id = new_mailbox_id('client')
        self.transport().register(mailbox_id, None)
        return mailbox_id

    def terminate(self, mailbox_id: str, *, reason: str | None = None) -> None:
        """Close a mailbox for good.

        Args:
            mailbox_id: The mailbox.
            reason: Why (the error its agent failed with ...): requests still waiting in
                the mailbox are answered with MailboxClosedError saying so.
        """
        transport = self.transport()
        if reason is None:
            transport.terminate(mailbox_id)
            return
        transport._why[mailbox_id] = reason
        try:
            transport.terminate(mailbox_id)
        finally:
            transport._why.pop(mailbox_id, None)

    def status(self, mailbox_id: str) -> MailboxStatus:
        """The state of a mailbox."""
        return self.transport().status(mailbox_id)

    def discover(self, behavior: type[Behavior], *, allow_subclasses: bool = True) -> list[str]:
        """Ids of active agents running ``behavior`` (or, by default, a subclass of it)."""
        name = f'{behavior.__module__}.{behavior.__qualname__}'
        return sorted(self.transport().discover(name, allow_subclasses))

    def agent_stats(self, agent_id: str, *, timeout: float | None = None) -> dict[str, int]:
        """The agent's request counts: ``incoming`` (accepted), ``completed``,
        ``in_progress``, ``queued`` (waiting for a free slot) and ``outgoing`` (requests its
        actions sent through handles), since it started.

        Raises:
            ActionTimeoutError: if the agent does not answer within ``timeout``.
        """
        from tether.agents.handle import Handle
        from tether.agents.message import Stats

        counts = Handle(agent_id, self)._mailbox().request(agent_id, Stats).result(timeout)
        return {str(k): int(v) for k, v in counts.items()}

    def get_handle(self, agent_id: str) -> Handle[Any]:
        """A handle to the agent with that id."""
        from tether.agents.handle import Handle

        return Handle(agent_id, self)

    def send(self, msg: Message) -> None:
        """Send one message (the low-level API handles are built on)."""
        self.transport().send(msg)

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.key()!r})'

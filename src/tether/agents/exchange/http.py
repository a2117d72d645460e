"""HttpExchange: a client of a hosted exchange (see :mod:`tether.agents.exchange.hosted`).

```python
from tether.agents.exchange import HttpExchange

exchange = HttpExchange('wss://exchange.example.org:8700', token_env='TETHER_EXCHANGE_TOKEN')
```

The exchange pickles as its URL and the *name* of the environment variable holding the
token, never the token: agents launched in other processes read it from their
environment (a ``token=`` given here serves this process only).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import logging
import os
import queue
import threading
import uuid
from pathlib import Path
from typing import Any, ClassVar

from tether._clock import SYSTEM_CLOCK, Clock
from tether.agents._codec import Codec
from tether.agents.exchange._base import Deliver, Exchange, Listener, MailboxStatus, Transport
from tether.agents.exchange._hosted_wire import pack, unpack
from tether.agents.exchange.factory import ExchangeFactory
from tether.agents.message import Message, Response, decode, encode
from tether.exceptions import (
    AgentError,
    AuthenticationError,
    FrameTooLargeError,
    InvalidArgumentError,
    MailboxClosedError,
    ProtocolError,
    TetherError,
    UnknownMailboxError,
    WireConnectionError,
)

__all__ = ['DEFAULT_TOKEN_ENV', 'HttpExchange', 'HttpExchangeFactory']

logger = logging.getLogger(__name__)

#: The environment variable an :class:`HttpExchange` reads its token from by default.
DEFAULT_TOKEN_ENV = 'TETHER_EXCHANGE_TOKEN'

_ERRORS: dict[str, type[AgentError] | type[FrameTooLargeError] | type[ProtocolError]] = {
    'unknown': UnknownMailboxError,
    'closed': MailboxClosedError,
    'too_large': FrameTooLargeError,
    'quota': AgentError,
    'denied': AgentError,
    'bad': ProtocolError,
}


_local_tokens: dict[str, str] = {}


class _Slot:
    __slots__ = ('body', 'done', 'header')

    def __init__(self) -> None:
        self.done = threading.Event()
        self.header: dict[str, Any] = {}
        self.body: memoryview = memoryview(b'')


@dataclasses.dataclass(eq=False, repr=False)
class _HttpListener(Listener):
    transport: _HttpTransport
    mailbox_id: str
    deliver: Deliver
    closed: bool = dataclasses.field(default=False, init=False)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        t = self.transport
        if t._delivers.get(self.mailbox_id) is self.deliver:
            t._delivers.pop(self.mailbox_id, None)
            t._listeners.pop(self.mailbox_id, None)
            if not t._gone.is_set():
                try:
                    t.call({'op': 'unlisten', 'mb': self.mailbox_id})
                except TetherError as e:
                    logger.debug('unlisten %s: %s', self.mailbox_id, e)


class _HttpTransport(Transport):
    def __init__(self, exchange: HttpExchange) -> None:
        by_store = exchange.threshold is not None and exchange._store_config is not None
        super().__init__(
            Codec(
                allow_pickle=exchange.allow_pickle,
                store_getter=exchange.store if by_store else None,
                threshold=exchange.threshold,
                exchange=exchange,
            )
        )
        self.exchange = exchange
        self._ids = itertools.count(1)
        self._slots: dict[int, _Slot] = {}
        self._delivers: dict[str, Deliver] = {}
        self._listeners: dict[str, _HttpListener] = {}
        self._registered: dict[str, list[str] | None] = {}  # made again after a reconnect
        self._inbox: queue.SimpleQueue[tuple[str, bytes] | None] = queue.SimpleQueue()
        self._gone = threading.Event()  # set while disconnected
        self._up = threading.Event()  # set while connected
        self._ready = threading.Event()  # connected, and this process's mailboxes restored
        self._why_gone = ''
        self._connect()
        self._ready.set()
        self._reader = threading.Thread(target=self._read, name='tether-hosted-read', daemon=True)
        self._deliverer = threading.Thread(
            target=self._deliver, name='tether-hosted-deliver', daemon=True
        )
        self._reader.start()
        self._deliverer.start()

    # Plumbing ---------------------------------------------------------------------

    def _connect(self) -> None:
        from tether.agents.exchange._hosted_conn import Connection

        exchange = self.exchange
        ssl_ctx = None
        if exchange.url.startswith('wss://'):
            from tether._serve.tls import client_context

            ssl_ctx = client_context(exchange.ca_file, verify=exchange.verify)
        ws = Connection(
            exchange.url,
            {'Authorization': f'Bearer {exchange._token()}'},
            ssl_ctx,
            exchange.timeout,
        )
        messages = ws.messages()
        try:
            hello, _ = unpack(next(messages))
        except StopIteration:
            ws.close()
            raise WireConnectionError(
                f'the hosted exchange at {exchange.url} closed the connection'
            ) from None
        if hello.get('op') == 'error':
            ws.close()
            raise AgentError(f'the hosted exchange at {exchange.url}: {hello.get("message")}')
        self.ws, self._messages = ws, messages
        self.user: str = hello['user']
        self.max_message_bytes: int = hello['max_message_bytes']
        self._gone.clear()
        self._up.set()

    def _read(self) -> None:
        delay = 0.05
        while True:
            self._read_one()
            if self.closed:
                break
            self.ws.close()
            # What was sent before this point may be lost (see _restore_all).
            for listener in list(self._listeners.values()):
                if listener.on_check is not None:
                    listener.on_check()
            # Lost the server: connect again (with backoff) until closed, then make this
            # process's mailboxes and listeners again (what was in flight may be lost).
            while not self.closed:
                try:
                    self._connect()
                except TetherError as e:  # unreachable, refused, or over a limit for now
                    logger.warning('hosted exchange %s: %s (retrying)', self.exchange.url, e)
                    self._up.wait(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                delay = 0.05
                threading.Thread(target=self._restore_all, daemon=True).start()
                break
        self._inbox.put(None)

    def _read_one(self) -> None:
        try:
            for data in self._messages:
                header, body = unpack(data)
                if header.get('op') == 'deliver':
                    self._inbox.put((str(header.get('mb')), bytes(body)))
                    continue
                slot = self._slots.pop(header.get('id', -1), None)
                if slot is not None:
                    slot.header, slot.body = header, body
                    slot.done.set()
                elif header.get('error') is not None:  # of a send nobody waits for
                    logger.warning(
                        'hosted exchange %s: %s', self.exchange.url, header.get('message')
                    )
        except Exception as e:
            self._why_gone = str(e)
        finally:
            self._why_gone = self._why_gone or 'the connection was lost'
            self._ready.clear()
            self._up.clear()
            self._gone.set()
            for rid in list(self._slots):
                slot = self._slots.pop(rid, None)
                if slot is not None:
                    slot.done.set()

    def _restore_all(self) -> None:
        listeners = dict(self._listeners)
        try:
            for mailbox_id, mro in list(self._registered.items()):
                self.call({'op': 'register', 'mb': mailbox_id, 'mro': mro}, restoring=True)
            for mailbox_id, listener in listeners.items():
                if self._delivers.get(mailbox_id) is listener.deliver:
                    self._listen_again(mailbox_id)
        except TetherError as e:
            logger.warning('hosted exchange %s: restoring mailboxes: %s', self.exchange.url, e)
            return
        finally:
            self._ready.set()
        logger.warning(
            'hosted exchange %s: reconnected; messages in flight meanwhile may be lost',
            self.exchange.url,
        )
        for listener in listeners.values():
            if listener.on_lost is not None:
                try:
                    listener.on_lost()
                except Exception:
                    logger.exception('handling a lost connection failed')

    def _listen_again(self, mailbox_id: str) -> None:
        """Listen again; a mailbox another process registered (an agent's, made by its
        manager) may take that process a moment to make again on a restarted server."""
        delay = 0.05
        for _ in range(8):
            try:
                self.call({'op': 'listen', 'mb': mailbox_id}, restoring=True)
                return
            except UnknownMailboxError:
                self._gone.wait(delay)
                delay *= 2
        self.call({'op': 'listen', 'mb': mailbox_id}, restoring=True)

    def _deliver(self) -> None:
        while (item := self._inbox.get()) is not None:
            mailbox_id, data = item
            deliver = self._delivers.get(mailbox_id)
            if deliver is None:
                logger.warning(
                    'a message for %s arrived with nobody listening: dropped', mailbox_id
                )
                continue
            try:
                deliver(decode(data, self.codec))
            except Exception:
                logger.exception('delivering a message to %s failed', mailbox_id)

    def call(
        self, header: dict[str, Any], body: bytes = b'', *, restoring: bool = False
    ) -> tuple[dict[str, Any], memoryview]:
        """Send one request and wait for its answer (errors raised as tether's); while
        the connection is being made again, wait for it (at most the exchange's timeout).
        """
        ready = self._up if restoring else self._ready
        if not ready.is_set() and not ready.wait(self.exchange.timeout):
            raise WireConnectionError(f'hosted exchange {self.exchange.url}: {self._why_gone}')
        rid = next(self._ids)
        slot = self._slots[rid] = _Slot()
        header['id'] = rid
        try:
            self.ws.send(pack(header, body))
        except WireConnectionError:
            self._slots.pop(rid, None)
            raise
        slot.done.wait()
        if 'id' not in slot.header:
            raise WireConnectionError(f'hosted exchange {self.exchange.url}: {self._why_gone}')
        kind = slot.header.get('error')
        if kind is not None:
            raise _ERRORS.get(kind, AgentError)(str(slot.header.get('message')))
        return slot.header, slot.body

    # The transport contract -------------------------------------------------------

    def register(self, mailbox_id: str, mro: list[str] | None) -> None:
        self.call({'op': 'register', 'mb': mailbox_id, 'mro': mro})
        self._registered[mailbox_id] = mro

    def terminate(self, mailbox_id: str) -> None:
        self._registered.pop(mailbox_id, None)
        header, body = self.call(
            {'op': 'terminate', 'mb': mailbox_id, 'why': (self._why.get(mailbox_id) or '')[:1000]}
        )
        dropped: list[Any] = []
        pos = 0
        for n in header.get('sizes', []):
            dropped.append(decode(body[pos : pos + n], self.codec))
            pos += n
        self.answer_dropped(mailbox_id, dropped)

    def status(self, mailbox_id: str) -> MailboxStatus:
        header, _ = self.call({'op': 'status', 'mb': mailbox_id})
        return MailboxStatus(header['status'])

    def discover(self, type_name: str, allow_subclasses: bool) -> list[str]:
        header, _ = self.call({'op': 'discover', 'type': type_name, 'sub': allow_subclasses})
        return list(header['ids'])

    def _push(self, dest: str, data: bytes, src: str | None) -> None:
        if len(data) > self.max_message_bytes:
            raise FrameTooLargeError(
                f'message of {len(data)} bytes to {dest!r} exceeds the limit of user '
                f'{self.user!r} on {self.exchange.url} (max_message_bytes = '
                f'{self.max_message_bytes}): pass large values by proxy'
            )
        self.call({'op': 'send', 'dest': dest, 'src': src}, data)

    def send(self, msg: Message) -> None:
        data = encode(msg, self.codec).to_bytes()
        if type(msg) is Response and self._ready.is_set() and len(data) <= self.max_message_bytes:
            # An answer: its sender (an agent) only logs a failure to deliver it, so it
            # need not wait for the server's acknowledgement (a failure is logged here).
            try:
                self.ws.send(
                    pack({'op': 'send', 'dest': msg.dest, 'src': msg.src, 'noack': 1}, data)
                )
                return
            except WireConnectionError:
                pass  # reconnecting: send it the waiting way
        self._push(msg.dest, data, msg.src)

    def send_raw(self, dest: str, data: bytes) -> None:
        self._push(dest, data, None)

    def listen(self, mailbox_id: str, deliver: Deliver) -> Listener:
        self._delivers[mailbox_id] = deliver
        try:
            self.call({'op': 'listen', 'mb': mailbox_id})
        except BaseException:
            self._delivers.pop(mailbox_id, None)
            raise
        listener = self._listeners[mailbox_id] = _HttpListener(self, mailbox_id, deliver)
        return listener

    def share(self, mailbox_id: str, user: str, *, revoke: bool = False) -> None:
        self.call({'op': 'unshare' if revoke else 'share', 'mb': mailbox_id, 'user': user})

    def close(self) -> None:
        if self.closed:
            return
        try:
            super().close()
        except TetherError as e:
            logger.debug('closing the client mailbox: %s', e)
        self._delivers.clear()
        self.closed = True
        self._up.set()  # wakes a reconnect backoff
        self._ready.set()
        self.ws.close()
        self._reader.join(10)
        self._deliverer.join(10)


class HttpExchange(Exchange):
    """A client of a hosted exchange.

    Args:
        url: ``ws://host:port`` or ``wss://host:port`` (``http``/``https`` are accepted
            and mean the same).
        token: The user's bearer token, for this process only (never pickled).
        token_env: The environment variable holding the token where ``token`` is not
            given (and in every process a copy of the exchange is sent to).
        ca_file: Certificate authority (or the server's self-signed certificate) to
            trust for ``wss://`` (``None``: the system's).
        verify: Check the server's certificate (only turn off for tests).
        timeout: Seconds to wait for the connection to open.
        allow_pickle: Accept pickled values in messages this process receives.
        clock: The clock of this process's handle timeouts.
        store: Values larger than ``threshold`` bytes travel through this store, as a
            reference in the message (``None``: every value goes inline, within the
            server's ``max_message_bytes``). Every process gets its own store of the
            same configuration (built there on first use).
        threshold: Size in bytes above which values go through ``store``.
    """

    _not_pickled: ClassVar[tuple[str, ...]] = ('_token_value', '_store')
    _settings: ClassVar[tuple[str, ...]] = (
        'url',
        'token_env',
        'ca_file',
        'verify',
        'timeout',
        'allow_pickle',
    )

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        token_env: str = DEFAULT_TOKEN_ENV,
        ca_file: str | Path | None = None,
        verify: bool = True,
        timeout: float = 30.0,
        allow_pickle: bool = False,
        clock: Clock = SYSTEM_CLOCK,
        store: Any = None,
        threshold: int | None = 100_000,
    ) -> None:
        super().__init__(allow_pickle=allow_pickle, clock=clock)
        self.threshold = threshold
        self._store = store
        self._store_config = store.config() if store is not None else None
        for http, ws in (('http://', 'ws://'), ('https://', 'wss://')):
            if url.startswith(http):
                url = ws + url[len(http) :]
        if not url.startswith(('ws://', 'wss://')):
            raise InvalidArgumentError(
                f'hosted exchange URL {url!r} must start with ws:// or wss://'
            )
        self.url = url.rstrip('/')
        self.token_env = token_env
        self._token_value = token
        # A copy unpickled in this process finds the token here (never in the pickle).
        self._token_ref = uuid.uuid4().hex if token else None
        if token:
            _local_tokens[self._token_ref] = token  # type: ignore[index]
        self.ca_file = str(ca_file) if ca_file is not None else None
        self.verify = verify
        self.timeout = timeout

    def _token(self) -> str:
        token = (
            self._token_value
            or _local_tokens.get(self._token_ref or '')
            or os.environ.get(self.token_env)
        )
        if not token:
            raise AuthenticationError(
                f'no token for the hosted exchange at {self.url}: pass token= or set '
                f'${self.token_env}'
            )
        return token

    def store(self) -> Any:
        """The store large values travel through (``None``: values go inline)."""
        if self.threshold is None or self._store_config is None:
            return None
        if self._store is not None and not self._store.closed:
            return self._store
        from tether.store import get_or_create_store

        self._store = get_or_create_store(self._store_config)
        return self._store

    def key(self) -> str:
        # One transport per user and server: two users in one process stay apart.
        who = hashlib.sha256(self._token().encode()).hexdigest()[:16]
        return f'hosted:{self.url}#{who}'

    def make_transport(self) -> Transport:
        return _HttpTransport(self)

    @property
    def user(self) -> str:
        """The user the token belongs to (as the server knows it)."""
        transport = self.transport()
        assert isinstance(transport, _HttpTransport)
        return transport.user

    def share(self, agent_id: str, user: str) -> None:
        """Let ``user`` send to, see and discover the agent ``agent_id`` (yours); the agent
        may then answer that user's mailboxes."""
        self._http().share(agent_id, user)

    def unshare(self, agent_id: str, user: str) -> None:
        """Revoke :meth:`share`: ``user`` can no longer send to, see or discover it."""
        self._http().share(agent_id, user, revoke=True)

    def _http(self) -> _HttpTransport:
        transport = self.transport()
        assert isinstance(transport, _HttpTransport)
        return transport


class HttpExchangeFactory(ExchangeFactory):
    """academy-py 1.0's factory of a hosted exchange: an :class:`HttpExchange`.

    Args:
        url: The exchange's address (``https://``/``wss://``, or ``http://``/``ws://``).
        auth_method: academy-py's ``'globus'`` is not supported (tether's exchange takes
            a bearer token); ``None``.
        additional_headers: An ``Authorization: Bearer <token>`` header is taken as the
            token; other headers are refused.
        request_timeout_s: Seconds to wait for the connection to open.
        ssl_verify: Check the server's certificate (``None``: yes).
        client_timeout: Accepted for academy-py's signature (unused).
        token: The bearer token (this process only), else ``$token_env``.
        token_env: The variable agents in other processes read the token from.
        ca_file: Certificate (authority) to trust for ``wss://``.
        store: Store that values above ``threshold`` bytes travel through (see
            :class:`HttpExchange`).
        threshold: Size in bytes above which values go through ``store``.
    """

    def __init__(  # noqa: PLR0917 - academy-py 1.0's signature
        self,
        url: str,
        auth_method: str | None = None,
        additional_headers: dict[str, str] | None = None,
        request_timeout_s: float = 60,
        ssl_verify: bool | None = None,
        client_timeout: Any = None,
        *,
        token: str | None = None,
        token_env: str = DEFAULT_TOKEN_ENV,
        ca_file: str | Path | None = None,
        store: Any = None,
        threshold: int | None = 100_000,
    ) -> None:
        del client_timeout
        if auth_method is not None:
            raise InvalidArgumentError(
                f'auth_method={auth_method!r} is not supported: a tether hosted exchange '
                'takes a bearer token (token= or $TETHER_EXCHANGE_TOKEN)'
            )
        headers = dict(additional_headers or {})
        auth = headers.pop('Authorization', None)
        if headers:
            raise InvalidArgumentError(
                f'unsupported headers {sorted(headers)}: only Authorization'
            )
        if auth is not None:
            scheme, _, value = auth.partition(' ')
            if scheme.lower() != 'bearer' or not value:
                raise InvalidArgumentError('the Authorization header must be "Bearer <token>"')
            token = token or value
        self._exchange = HttpExchange(
            url,
            token=token,
            token_env=token_env,
            ca_file=ca_file,
            verify=ssl_verify is not False,
            timeout=request_timeout_s,
            store=store,
            threshold=threshold,
        )

    def exchange(self) -> Exchange:
        return self._exchange

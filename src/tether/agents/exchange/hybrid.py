"""HybridExchange: direct connections between processes, Redis for discovery and fallback.

Every process that listens on a mailbox runs one authenticated :mod:`tether._wire` server
(on its own event-loop thread) for all of its mailboxes. A mailbox's address is written
to Redis (``addr:<id>``) only once that server is listening and the mailbox is served
there, and it is removed before the mailbox stops being served. A sender looks the
address up once (and caches it) and writes the envelope on one pipelined link per peer
process (:mod:`tether.agents.exchange._link`): it does not wait for the receiver's
acknowledgement, a reader thread collects them. If there is no address, the link cannot
be opened, the receiver no longer serves that mailbox, or the link breaks before the
message was acknowledged, the message goes to the mailbox's Redis list instead (exactly
as with :class:`~tether.agents.exchange.RedisExchange`), which every listener also
drains. So nothing is lost while an agent is offline or unreachable.

Connections are authenticated with a shared secret: the ``secret`` argument (this process
only), else the environment variable ``secret_env``, else the file ``secret_file``, else
a random secret the exchange keeps in Redis (so Redis stays the one thing to protect).
With ``tls_cert`` and ``tls_key`` every direct connection also runs inside TLS: servers
present that certificate, and senders verify it against ``tls_ca`` (default: the
certificate itself, the usual set-up of one self-signed certificate per site) before the
challenge-response starts, so the frames are encrypted and a sender never talks to a
server that cannot show the site's certificate.
"""

from __future__ import annotations

import os
import secrets
import ssl
from typing import Any, ClassVar

from tether._serve.tls import client_context, server_context
from tether.agents.exchange._base import Transport
from tether.agents.exchange._hybrid_transport import _SECRET_TTL, HybridTransport
from tether.agents.exchange.redis import _DEFAULT_THRESHOLD, RedisExchange
from tether.exceptions import AgentError

__all__ = ['HybridExchange']


class HybridExchange(RedisExchange):
    """Direct authenticated connections where peers reach each other, Redis otherwise.

    Args:
        hostname: Host of the Redis server (discovery, addresses and fallback mailboxes).
        port: Its port.
        prefix: Prefix of every Redis key of this exchange.
        host: Address the per-process server binds to.
        advertise_host: Address published for peers (default: ``host``).
        secret: Shared secret of the direct connections, for this process only.
        secret_env: Environment variable holding the secret (checked next).
        secret_file: File holding the secret (checked next); otherwise a random secret
            kept in Redis under the prefix is used.
        max_message: Largest direct message accepted, in bytes.
        tls_cert: PEM certificate this process's server presents (with ``tls_key``):
            direct connections then run inside TLS.
        tls_key: PEM private key of ``tls_cert`` (a file readable by this user only).
        tls_ca: PEM file of the certificates senders accept from servers (default:
            ``tls_cert``, for one self-signed certificate shared by a site's processes).
        tls_server_name: Name checked against a server's certificate (default: the host
            part of its published address).
        shm: Send values above ``threshold`` to processes of this host through
            reusable shared-memory slots of the sender (copied out by the receiver when
            the message arrives) instead of through ``store``, and read such slots of
            other processes; messages that go through Redis, or to other hosts, still
            use ``store``. ``False``: neither.
        kwargs: The other arguments of :class:`~tether.agents.exchange.RedisExchange`.
    """

    _not_pickled: ClassVar[tuple[str, ...]] = (*RedisExchange._not_pickled, '_secret_value')
    _settings: ClassVar[tuple[str, ...]] = (
        *RedisExchange._settings,
        'host',
        'advertise_host',
        'secret_env',
        'secret_file',
        'max_message',
        'tls_cert',
        'tls_key',
        'tls_ca',
        'tls_server_name',
        'shm',
    )

    def __init__(
        self,
        hostname: str = '127.0.0.1',
        port: int = 6379,
        *,
        prefix: str = 'tether-agents:',
        host: str = '127.0.0.1',
        advertise_host: str | None = None,
        secret: str | bytes | None = None,
        secret_env: str | None = 'TETHER_AGENTS_SECRET',
        secret_file: str | None = None,
        max_message: int = 1 << 30,
        threshold: int | None = _DEFAULT_THRESHOLD,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        tls_ca: str | None = None,
        tls_server_name: str | None = None,
        shm: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(hostname, port, prefix=prefix, threshold=threshold, **kwargs)
        self.host = host
        self.advertise_host = advertise_host
        self._secret_value = secret
        self.secret_env = secret_env
        self.secret_file = secret_file
        self.max_message = max_message
        if (tls_cert is None) != (tls_key is None):
            raise ValueError('tls_cert and tls_key go together: give both or neither')
        if tls_ca is not None and tls_cert is None:
            raise ValueError('tls_ca needs tls_cert and tls_key (every process serves too)')
        self.tls_cert = tls_cert
        self.tls_key = tls_key
        self.tls_ca = tls_ca
        self.tls_server_name = tls_server_name
        self.shm = shm

    @property
    def tls(self) -> bool:
        """Whether direct connections run inside TLS."""
        return self.tls_cert is not None

    def _server_tls(self) -> ssl.SSLContext | None:
        if self.tls_cert is None:
            return None
        try:
            return server_context(self.tls_cert, self.tls_key)
        except (OSError, ssl.SSLError) as e:
            raise AgentError(
                f'cannot load the exchange certificate {self.tls_cert!r} and key '
                f'{self.tls_key!r}: {e}',
            ) from e

    def _client_tls(self) -> ssl.SSLContext | None:
        if self.tls_cert is None:
            return None
        try:
            return client_context(self.tls_ca or self.tls_cert)
        except (OSError, ssl.SSLError) as e:
            raise AgentError(
                f'cannot load the exchange CA file {self.tls_ca or self.tls_cert!r}: {e}'
            ) from e

    def key(self) -> str:
        return 'hybrid:' + super().key()

    def _secret_key(self) -> str | None:
        """The Redis key of the secret, when it is the random one kept in Redis."""
        if self._secret_value is not None:
            return None
        if self.secret_env and os.environ.get(self.secret_env) is not None:
            return None
        if self.secret_file:
            return None
        return f'{self.prefix}secret'

    def _secret(self, redis: Any) -> bytes:
        value = self._secret_value
        if value is None and self.secret_env:
            value = os.environ.get(self.secret_env)
        if value is None and self.secret_file:
            try:
                with open(self.secret_file, 'rb') as f:
                    value = f.read().strip()
            except OSError as e:
                raise AgentError(
                    f'cannot read the exchange secret file {self.secret_file!r}: {e}'
                ) from e
        if value is None:
            key = f'{self.prefix}secret'
            redis.execute('SET', key, secrets.token_hex(32), 'NX', 'EX', _SECRET_TTL)
            value = redis.execute('GET', key)
        return value.encode() if isinstance(value, str) else bytes(value)

    def make_transport(self) -> Transport:
        return HybridTransport(self)

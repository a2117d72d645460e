"""RedisExchange: mailboxes are Redis lists, so they outlive the agents that read them.

Keys (all under the exchange's ``prefix``):

* ``st:<id>``: the mailbox state (``active`` or ``terminated``);
* ``mb:<id>``: the mailbox, a list of envelopes (see :mod:`tether.agents._message`);
* ``taken:<id>``: messages a listener took from the mailbox and has not yet handed to
  its agent (put back at the head of the mailbox when a listener starts, so a process
  that dies between taking and handing over loses nothing);
* ``beh``: a hash from agent id to its behavior's class names (discovery).

An agent's active mailbox stays while it is active (messages wait for an agent that is
away); a client mailbox (a process's, for answers) expires 60 s after its listener stopped
refreshing it. Terminating a mailbox deletes its keys but the state, which says
``terminated`` (with the reason, when one was given) for ``terminated_ttl`` seconds (a
day by default) and then expires. A listener that finds its mailbox gone (Redis lost its
data) makes it again; one that was terminated never comes back.

Sending checks the state and appends in one atomic script (one round trip); a listener
thread per mailbox takes messages with ``BLMOVE`` and drains bursts with one script.
Messages sent while an agent is offline wait in its list until it listens again.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from typing import Any, ClassVar

from tether._clock import SYSTEM_CLOCK, Clock
from tether.agents._codec import Codec
from tether.agents.exchange._base import Deliver, Exchange, Listener, MailboxStatus, Transport
from tether.agents.exchange._resp import RedisReplyError, RespClient
from tether.agents.exchange._resp_cluster import ClusterRespClient
from tether.agents.message import Message, decode, encode
from tether.exceptions import AgentError, ConfigError, MailboxClosedError, UnknownMailboxError

__all__ = ['RedisExchange']

logger = logging.getLogger(__name__)

_SEND = """
local st = redis.call('GET', KEYS[1])
if not st then return -1 end
if st ~= 'active' then return st end
redis.call('RPUSH', KEYS[2], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
"""
_RECOVER = """
local n = 0
while redis.call('RPOPLPUSH', KEYS[1], KEYS[2]) do n = n + 1 end
return n
"""
_TAKE = """
local out = redis.call('LPOP', KEYS[1], ARGV[1])
if not out then return {} end
redis.call('RPUSH', KEYS[2], unpack(out))
return out
"""
_TERMINATE = """
local queued = redis.call('LRANGE', KEYS[3], 0, -1)
local taken = redis.call('LRANGE', KEYS[4], 0, -1)
redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[2])
if KEYS[2] ~= KEYS[1] then redis.call('HDEL', KEYS[2], ARGV[1]) end
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5])
for _, v in ipairs(queued) do table.insert(taken, v) end
return taken
"""
# A mailbox whose state key vanished (Redis restarted without its data, or evicted it)
# is made again by its listener, with its discovery record: 1 when it had vanished, -1
# when it is terminated (never made active again), 0 when it is active (its discovery
# record is then made again if it is missing: someone else remade the mailbox).
_RESTORE = """
local st = redis.call('GET', KEYS[1])
if st == 'active' then
  if ARGV[2] ~= '' then
    if KEYS[2] ~= KEYS[1] then redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) end
    redis.call('PERSIST', KEYS[1])
  end
  return 0
end
if st then return -1 end
if ARGV[2] == '' then
  redis.call('SET', KEYS[1], 'active', 'EX', ARGV[3])
else
  redis.call('SET', KEYS[1], 'active')
  if KEYS[2] ~= KEYS[1] then redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) end
end
return 1
"""
_WAKE = b'\x00tether-agents-wake:'
_BLOCK = 5.0
_BATCH = 256
# A client mailbox (a process's, for responses) expires _CLIENT_TTL seconds after its
# listener last refreshed it (every _CLIENT_REFRESH seconds), and what waits in it too.
_CLIENT_TTL = 60
_CLIENT_REFRESH = 20.0
_MAX_REASON = 1000
_DEFAULT_THRESHOLD = 100_000


class _RedisListener(Listener):
    def __init__(self, transport: _RedisTransport, mailbox_id: str, deliver: Deliver) -> None:
        self.transport = transport
        self.key = transport.k('mb', mailbox_id)
        self.taken = transport.k('taken', mailbox_id)
        self.deliver = deliver
        self.token = _WAKE + uuid.uuid4().hex.encode()
        self.stopping = threading.Event()
        self.drained = threading.Event()
        # Marker entries pushed into the mailbox, and what to call when the listener
        # reaches one (everything pushed before it has then been handed over).
        self.barriers: dict[bytes, Any] = {}
        self.mailbox_id = mailbox_id
        # Called (with no argument) when the listener found its mailbox gone and made it
        # again: what waited in it, and answers sent to it meanwhile, are lost.
        self.on_lost: Any = None
        self.on_check: Any = None
        self.terminated = False
        self.recovered = False  # whether what a dead listener took was put back
        # The discovery record, to make it again with the mailbox (empty: a client).
        self.mro = transport.redis.execute('HGET', transport.k('beh'), mailbox_id) or b''
        # Client mailboxes (no discovery record) expire unless their listener refreshes
        # them; agents' mailboxes stay while they are active.
        self.next_keep_alive = float('inf') if self.mro else time.monotonic() + _CLIENT_REFRESH
        self.conn = transport.redis.connect(timeout=_BLOCK + 10, key=self.key)
        self.thread = threading.Thread(
            target=self._run, name=f'tether-agents-redis-{mailbox_id[:14]}', daemon=True
        )
        self.thread.start()

    def _run(self) -> None:
        failures = 0
        batch_next = True  # first drain what is queued, then block
        self.recovered = False
        while not self.stopping.is_set():
            try:
                batch = self._fetch(batch_next)
                # After a message, drain what else is queued without blocking; once the
                # list is empty, block again.
                if batch_next and not batch:
                    self.drained.set()
                batch_next = bool(batch)
                failures = 0
            except AgentError as e:
                if self.stopping.is_set():
                    break
                failures += 1
                self.recovered = False  # Redis may have restarted: check the mailbox again
                logger.warning('mailbox listener on %s: %s (retrying)', self.key, e)
                self.stopping.wait(min(0.1 * 2**failures, 5.0))
                continue
            now = time.monotonic()
            if now >= self.transport._next_refresh:
                self.transport._refresh()
            if now >= self.next_keep_alive:
                self._keep_alive(now)
            if batch:
                self._hand_over(batch)

    def _fetch(self, batch_next: bool) -> list[bytes]:
        """The next messages: what is queued (``batch_next``), else one, blocking."""
        if not self.recovered:
            # Messages a previous listener took but never handed over (its process died
            # in between) go back to the head of the mailbox. After a failure, the mailbox
            # may also be gone (see _check_mailbox).
            self._check_mailbox()
            self.transport._recover(keys=[self.taken, self.key])
            self.recovered = True
        if batch_next:
            return list(self.transport._take(keys=[self.key, self.taken], args=[_BATCH]))
        if self.conn.broken:
            self.conn.close()
            self.conn = self.transport.redis.connect(timeout=_BLOCK + 10, key=self.key)
        try:
            item = self.conn.execute('BLMOVE', self.key, self.taken, 'LEFT', 'RIGHT', _BLOCK)
        except RedisReplyError:
            # On a cluster: the slot moved (MOVED), or the cluster is failing over.
            self.conn.broken = True
            self.transport.redis.refresh_quietly()
            raise
        if item is None:
            # Idle for _BLOCK seconds: a cheap check that the mailbox still exists (Redis
            # may have lost it without the connection failing).
            self._check_mailbox()
            return []
        return [item]

    def _hand_over(self, batch: list[bytes]) -> None:
        """Deliver the messages taken (barriers release their gates), then forget them."""
        for data in batch:
            if data.startswith(_WAKE):
                reached = self.barriers.pop(data, None)
                if reached is not None:
                    reached()
                continue
            try:
                self.deliver(decode(data, self.transport.codec))
            except Exception:
                logger.exception('delivering a message from %s failed', self.key)
        # Handed over: the agent has them now.
        try:
            self.conn.execute('DEL', self.taken)
        except AgentError:
            logger.warning('could not clear %s', self.taken)

    def _keep_alive(self, now: float) -> None:
        """Extend the life of a client mailbox (its state, and what waits in it)."""
        self.next_keep_alive = now + _CLIENT_REFRESH
        try:
            replies = self.transport.redis.pipeline(
                [['EXPIRE', self.transport.k('st', self.mailbox_id), _CLIENT_TTL]]
                + [['EXPIRE', key, _CLIENT_TTL] for key in (self.key, self.taken)]
            )
        except AgentError as e:
            logger.warning('could not keep the mailbox %s alive: %s', self.mailbox_id, e)
            return
        if replies[0] == 0:  # gone (Redis lost it, or this process stalled too long)
            try:
                self._check_mailbox()
            except AgentError as e:
                logger.warning('could not check the mailbox %s: %s', self.mailbox_id, e)

    def _check_mailbox(self) -> None:
        """Make the mailbox again if Redis lost it (restarted without persistence ...).

        Its agent still runs and listens here, so it registers its mailbox (and its
        discovery record) again instead of lingering unreachable; whoever waited for
        what the mailbox held is told (:attr:`on_lost`).
        """
        if self.terminated:
            return
        if self.on_check is not None:
            self.on_check()
        restored = self.transport.restore_raw(self.mailbox_id, self.mro)
        if restored == -1:
            # Terminated under this listener: once its tombstone expires, the mailbox
            # must not come back.
            self.terminated = True
            return
        if restored != 1:
            return
        logger.warning(
            'mailbox %s had vanished from Redis at %s:%d (restarted without its data?); '
            'registered it again: the messages that waited in it are lost',
            self.mailbox_id,
            self.transport.exchange.hostname,
            self.transport.exchange.port,
        )
        # Barrier markers went with the list: nothing sent before them is left to wait for.
        for token in list(self.barriers):
            reached = self.barriers.pop(token, None)
            if reached is not None:
                reached()
        self.transport._mailbox_restored(self.mailbox_id)
        if self.on_lost is not None:
            try:
                self.on_lost()
            except Exception:
                logger.exception('handling the loss of mailbox %s failed', self.mailbox_id)

    def close(self) -> None:
        if self.stopping.is_set():
            return
        self.stopping.set()
        try:
            self.transport.redis.execute('LPUSH', self.key, self.token)
        except Exception:
            logger.debug('could not wake the listener of %s', self.key, exc_info=True)
        self.thread.join(_BLOCK + 1)
        try:
            self.transport.redis.execute('LREM', self.key, 0, self.token)
        except Exception:
            logger.debug('could not remove the wake token of %s', self.key, exc_info=True)
        self.conn.close()


class _RedisTransport(Transport):
    def __init__(self, exchange: RedisExchange) -> None:
        super().__init__(exchange._codec())
        self.exchange = exchange
        self.prefix = exchange.prefix
        self.cluster: bool = getattr(exchange, 'cluster', False)
        self.redis: Any
        if self.cluster:
            self.redis = ClusterRespClient(
                exchange.hostname,
                exchange.port,
                password=exchange._password(),
                timeout=exchange.timeout,
            )
        else:
            self.redis = RespClient(
                exchange.hostname,
                exchange.port,
                db=exchange.db,
                password=exchange._password(),
                timeout=exchange.timeout,
            )
        self._send_script = self.redis.script(_SEND)
        self._recover = self.redis.script(_RECOVER)
        self._take = self.redis.script(_TAKE)
        self._terminate = self.redis.script(_TERMINATE)
        self._restore = self.redis.script(_RESTORE)
        self._listeners: set[_RedisListener] = set()

    def k(self, kind: str, mailbox_id: str = '') -> str:
        if not mailbox_id:
            return f'{self.prefix}{kind}'
        if self.cluster:  # a mailbox's keys share its hash slot: {id} is their hash tag
            return f'{self.prefix}{kind}:{{{mailbox_id}}}'
        return f'{self.prefix}{kind}:{mailbox_id}'

    def _beh_key(self, mailbox_id: str) -> str:
        # A script's KEYS[2]. On a cluster the discovery hash is on another shard: the
        # script gets the state key again (and skips the hash), a command writes the hash.
        return self.k('st', mailbox_id) if self.cluster else self.k('beh')

    def restore_raw(self, mailbox_id: str, mro: bytes | str) -> Any:
        """Run the restore script: 1 made again, 0 active, -1 terminated."""
        restored = self._restore(
            keys=[self.k('st', mailbox_id), self._beh_key(mailbox_id)],
            args=[mailbox_id, mro, _CLIENT_TTL],
        )
        if self.cluster and mro and restored in (0, 1):
            self.redis.execute('HSETNX', self.k('beh'), mailbox_id, mro)
        return restored

    _next_refresh = float('inf')  # keys this transport keeps alive: none (see the hybrid)

    def _refresh(self) -> None:
        """Extend the lifetime of the keys that expire unless refreshed (see the hybrid)."""

    def _mailbox_restored(self, mailbox_id: str) -> None:
        """A listener of this process made its vanished mailbox again (see the hybrid)."""

    def restore(self, mailbox_id: str, mro: list[str] | None) -> bool:
        """Make a mailbox again if it vanished (never one that was terminated)."""
        restored = self.restore_raw(mailbox_id, json.dumps(mro) if mro is not None else '')
        return bool(restored == 1)

    def register(self, mailbox_id: str, mro: list[str] | None) -> None:
        if mro is None:
            # A client mailbox lives as long as its process: its listener keeps it alive
            # (see _RedisListener._keep_alive), and it expires once the process is gone.
            self.redis.execute('SET', self.k('st', mailbox_id), 'active', 'EX', _CLIENT_TTL)
            return
        commands: list[list[Any]] = [
            ['SET', self.k('st', mailbox_id), 'active'],
            ['HSET', self.k('beh'), mailbox_id, json.dumps(mro)],
        ]
        _check(self.redis.pipeline(commands))

    def terminate(self, mailbox_id: str) -> None:
        dropped = self._terminate(
            keys=[
                self.k('st', mailbox_id),
                self._beh_key(mailbox_id),
                self.k('mb', mailbox_id),
                self.k('taken', mailbox_id),
                self.k('addr', mailbox_id),
            ],
            args=[
                mailbox_id,
                max(1, int(self.exchange.terminated_ttl)),
                _tombstone(self._why.get(mailbox_id)),
            ],
        )
        if self.cluster:
            self.redis.execute('HDEL', self.k('beh'), mailbox_id)
        self.answer_dropped(
            mailbox_id,
            [decode(d, self.codec) for d in dropped if not d.startswith(_WAKE)],
        )

    def status(self, mailbox_id: str) -> MailboxStatus:
        raw = self.redis.execute('GET', self.k('st', mailbox_id))
        if raw is None:
            return MailboxStatus.MISSING
        return MailboxStatus.ACTIVE if raw == b'active' else MailboxStatus.TERMINATED

    def discover(self, type_name: str, allow_subclasses: bool) -> list[str]:
        flat = self.redis.execute('HGETALL', self.k('beh'))
        found = []
        for raw_id, raw_mro in zip(flat[::2], flat[1::2], strict=True):
            try:
                mro = json.loads(raw_mro)
            except ValueError:
                continue
            if not isinstance(mro, list) or not mro:
                continue
            if mro[0] == type_name or (allow_subclasses and type_name in mro):
                found.append(raw_id.decode())
        return found

    def push(self, dest: str, data: bytes) -> None:
        rc = self._send_script(keys=[self.k('st', dest), self.k('mb', dest)], args=[data])
        if rc == -1:
            raise UnknownMailboxError(f'no mailbox {dest!r} in {self.exchange!r}')
        if isinstance(rc, bytes):  # its state: 'terminated', maybe with the reason
            raise MailboxClosedError(f'mailbox {dest!r} is {rc.decode(errors="replace")}')

    def send(self, msg: Message) -> None:
        self.push(msg.dest, encode(msg, self.codec).to_bytes())

    def send_raw(self, dest: str, data: bytes) -> None:
        self.push(dest, data)

    def listen(self, mailbox_id: str, deliver: Deliver) -> Listener:
        return self._listen_redis(mailbox_id, deliver)

    def _listen_redis(self, mailbox_id: str, deliver: Deliver) -> _RedisListener:
        state = self.status(mailbox_id)
        if state is MailboxStatus.MISSING:
            raise UnknownMailboxError(f'no mailbox {mailbox_id!r} in {self.exchange!r}')
        if state is MailboxStatus.TERMINATED:
            raise MailboxClosedError(f'mailbox {mailbox_id!r} is terminated')
        listener = _RedisListener(self, mailbox_id, deliver)
        self._listeners.add(listener)
        return listener

    def close(self) -> None:
        super().close()
        for listener in list(self._listeners):
            listener.close()
        self._listeners.clear()
        self.redis.close()


def _tombstone(reason: str | None) -> str:
    """The state of a terminated mailbox: why it was terminated travels with it, so that
    later senders learn it too."""
    return 'terminated' if not reason else f'terminated ({reason[:_MAX_REASON]})'


def _check(replies: list[Any]) -> None:
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply


class RedisExchange(Exchange):
    """An exchange whose mailboxes are Redis lists (persistent while agents are offline).

    Args:
        hostname: Host of the Redis server.
        port: Its port.
        prefix: Prefix of every key the exchange writes (one prefix, one exchange).
        db: Redis database number.
        password_env: Name of an environment variable holding the Redis password (the
            password itself is never stored in the exchange, so it never travels when
            a handle or a launcher pickles the exchange).
        password: The password, for this process only (not pickled).
        timeout: Seconds a Redis command may take.
        allow_pickle: Accept pickled values in messages this process receives.
        store: Values larger than ``threshold`` bytes travel through this store
            (default: a store over the same Redis server, under this prefix).
        threshold: Size in bytes above which values go through ``store`` (``None``:
            never; values then travel inside the messages).
        terminated_ttl: Seconds a terminated mailbox is remembered as such (sending to
            it raises MailboxClosedError); then its key expires and it is unknown
            (UnknownMailboxError). Nothing else of a terminated mailbox stays in Redis.
        clock: The clock of this process's handle timeouts and thread agents' timers
            (not pickled: a copy in another process uses the system clock).
        cluster: The server is a node of a Redis Cluster: each mailbox's keys share a
            hash slot (``{id}`` is their hash tag), commands go to their slot's master,
            and a failed-over master is waited for (up to ``timeout``).

    Raises:
        ConfigError: ``cluster`` with ``db`` other than 0, or a ``prefix`` with ``{``.
    """

    _not_pickled: ClassVar[tuple[str, ...]] = ('_password_value', '_store')
    _settings: ClassVar[tuple[str, ...]] = (
        'hostname',
        'port',
        'prefix',
        'db',
        'password_env',
        'timeout',
        'allow_pickle',
        'threshold',
        'terminated_ttl',
        'cluster',
    )

    def __init__(
        self,
        hostname: str = '127.0.0.1',
        port: int = 6379,
        *,
        prefix: str = 'tether-agents:',
        db: int = 0,
        password_env: str | None = None,
        password: str | None = None,
        timeout: float = 10.0,
        allow_pickle: bool = False,
        store: Any = None,
        threshold: int | None = _DEFAULT_THRESHOLD,
        terminated_ttl: float = 86400.0,
        clock: Clock = SYSTEM_CLOCK,
        cluster: bool = False,
    ) -> None:
        super().__init__(allow_pickle=allow_pickle, clock=clock)
        hybrid = type(self).make_transport is not RedisExchange.make_transport
        if cluster and (db or '{' in prefix or hybrid):
            raise ConfigError(
                f'only a RedisExchange runs on a cluster, with db=0 and a prefix without '
                f'"{{" (got {type(self).__name__}, db={db}, prefix={prefix!r})'
            )
        self.cluster = cluster
        self.hostname = hostname
        self.port = port
        self.prefix = prefix
        self.db = db
        self.password_env = password_env
        self._password_value = password
        self.timeout = timeout
        self.threshold = threshold
        if terminated_ttl < 1:
            raise ValueError(f'terminated_ttl must be at least 1 s, got {terminated_ttl}')
        self.terminated_ttl = terminated_ttl
        self._store = store
        self._store_config = store.config() if store is not None else None

    def key(self) -> str:
        return f'redis:{self.hostname}:{self.port}/{self.db}/{self.prefix}'

    def _password(self) -> str | None:
        if self._password_value is not None:
            return self._password_value
        if self.password_env:
            return os.environ.get(self.password_env)
        return None

    def store(self) -> Any:
        """The store large values travel through (built in this process on first use)."""
        if self.threshold is None:
            return None
        if self._store is not None and not self._store.closed:
            return self._store
        from tether.store import get_or_create_store

        if self._store_config is None:
            from tether.connectors.redis import RedisConnector
            from tether.store import StoreConfig

            password = self._password()
            connector = RedisConnector(
                self.hostname,
                self.port,
                db=self.db,
                prefix=f'{self.prefix}obj:',
                cluster=self.cluster,
                password=password,  # kept in this process, never in the store's config
                password_env=self.password_env if password is not None else None,
            )
            self._store_config = StoreConfig.for_connector(
                f'tether-agents:{self.key()}', connector
            )
        self._store = get_or_create_store(self._store_config)
        return self._store

    def close(self) -> None:
        """Close this process's transport, and the default store if this process built it."""
        super().close()
        store, self._store = self._store, None
        if (
            store is not None
            and self._store_config is not None
            and self._store_config.name.startswith('tether-agents:')
        ):
            store.close()
            self._store_config = None

    def _codec(self) -> Codec:
        return Codec(
            allow_pickle=self.allow_pickle,
            store_getter=self.store if self.threshold is not None else None,
            threshold=self.threshold,
            exchange=self,
        )

    def make_transport(self) -> Transport:
        return _RedisTransport(self)

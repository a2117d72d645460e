"""The peer manager: opens, keeps and reopens channels to other endpoints of the user.

Peering (the initiator A wants objects owned by B):

1. A makes an offer: a fresh session id and session secret, its certificate, the
   addresses it can be dialled at, its NAT type and (for hole punching) the public
   mapping of a fresh UDP socket. The relay hands it to B (same user only).
2. B answers with its certificate, addresses, NAT type and UDP mapping.
3. Both sides pick the same path from the two: **direct** if B is reachable (TCP,
   TLS with B's pinned certificate), else **punched** if neither NAT is symmetric
   (UDP hole punching, then QUIC with B's pinned certificate), else **relayed**
   (TCP through the relay's data port, with end-to-end TLS inside).
4. On every path each channel then runs the wire handshake with the session secret, so
   B knows the channel comes from A (only A, B and their relay know the secret) and A
   knows it reached B (B's certificate).

If the chosen path fails, A offers again without it. A channel that drops fails the
request in flight; the next request opens new channels, re-peering if needed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from tether._serve import signalling as rp
from tether._serve.tls import pinned_client_context
from tether._wire import Connection, client_handshake, client_protocol, connect
from tether.exceptions import EndpointError, PeeringError, RemoteError, WireError

if TYPE_CHECKING:
    from tether.endpoint._server import Endpoint

from tether.endpoint._link import (
    _DIAL_TIMEOUT,
    _PUNCH_TIMEOUT,
    _QUIC_TIMEOUT,
    _TCP_PUNCH_TIMEOUT,
    LOST_WINDOW,
    PeerLink,
    tcp_keepalive,
    zeros,
)
from tether.endpoint._offers import PathAnswer, PathOffer, decode_answer, decode_offer, encode
from tether.endpoint._paths import choose_path, local_ip_towards, tunnel_transport

__all__ = ['PeerLink', 'PeerManager', 'choose_path', 'zeros']

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class _Inbound:
    """What a responder keeps about a peering another endpoint opened to it."""

    peer: str
    session: str
    secret: bytes
    cert: str
    udp: Any = None
    tcp_port: int | None = None


class PeerManager:
    """Peer links of one endpoint, and its side of the links other endpoints open."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.ep = endpoint
        self.links: dict[str, PeerLink] = {}
        self.names: dict[str, str] = {}
        self._opening: dict[str, asyncio.Task[PeerLink]] = {}
        self._inbound: dict[str, _Inbound] = {}
        self._by_session: dict[str, _Inbound] = {}
        self._tcp_ports: dict[str, int] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.nat: dict[str, Any] = {'nat': 'unknown'}
        self.lost: dict[str, tuple[str, str, float]] = {}
        """Per peer UUID: its name, why its last link failed, and when (monotonic)."""

    # Secrets for the peer server (the responder side) -----------------------------------

    def secret_of(self, client: str) -> bytes | None:
        """The session secret of the peer announcing itself as ``peer:<uuid>``."""
        if not client.startswith('peer:'):
            return None
        inbound = self._inbound.get(client[5:])
        return inbound.secret if inbound is not None else None

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def detect_nat(self) -> dict[str, Any]:
        """Classify this site's NAT through the relay (``check-nat``)."""
        from tether.endpoint._udp import nat_type

        relay = self.ep.relay
        if relay is None or relay.info is None:
            return {'nat': 'unknown', 'reason': 'not registered with a relay'}
        host = relay.address[0]
        result = await nat_type(host, relay.info.udp_ports, local_ip_towards(host))
        result['observed_tcp'] = relay.info.observed
        self.nat = result
        return result

    # Initiator -------------------------------------------------------------------------

    def describe(self, target: str) -> str:
        """``target`` (a UUID or a name) as messages name a peer: name and UUID if known."""
        uuid = self.names.get(target, target)
        link = self.links.get(uuid)
        name = link.name if link is not None else self.lost.get(uuid, (None,))[0]
        return f'{name} ({uuid})' if name and name != uuid else target

    def lost_recently(self, target: str) -> str | None:
        """Why the last link to ``target`` failed, if it did within :data:`LOST_WINDOW`."""
        lost = self.lost.get(self.names.get(target, target))
        if lost is None or time.monotonic() - lost[2] > LOST_WINDOW:
            return None
        return f'{lost[1]}, {time.monotonic() - lost[2]:.1f} s ago'

    def _lose(self, link: PeerLink) -> None:
        """Forget a link that is not alive, remembering why it failed."""
        reason = link.failure
        if reason != 'closed':
            self.lost[link.uuid] = (link.name, reason, time.monotonic())
        link.close()
        if self.links.get(link.uuid) is link:
            del self.links[link.uuid]

    def ready_link(self, target: str) -> PeerLink | None:
        """The live link to ``target`` if there is one now (no peering, no waiting)."""
        link = self.links.get(self.names.get(target, target))
        return link if link is not None and link.alive else None

    async def link(self, target: str) -> PeerLink:
        """A live link to ``target`` (UUID or name), peering first if needed.

        Raises:
            PeeringError: no path could be opened.
        """
        uuid = self.names.get(target, target)
        link = self.links.get(uuid)
        if link is not None and link.alive:
            return link
        if link is not None:
            logger.info(
                'peer %s (%s path) dropped (%s): re-peering', uuid, link.path, link.failure
            )
            self._lose(link)
        task = self._opening.get(uuid)
        if task is None:
            task = asyncio.ensure_future(self._peer(target))
            self._opening[uuid] = task
            task.add_done_callback(lambda _: self._opening.pop(uuid, None))
        return await asyncio.shield(task)

    async def _offer(self, paths: list[str], session: str) -> tuple[PathOffer, Any]:
        ep = self.ep
        nat = str(self.nat.get('nat', 'unknown'))
        udp = tcp = None
        if 'punched' in paths and nat in ('cone', 'open'):
            udp = await self._udp_mapping(bytes.fromhex(session))
            tcp = await self._tcp_mapping() if 'tcp' in ep.config.peering.punch else None
            if tcp is not None:
                self._tcp_ports[session] = tcp[0]
        offer = PathOffer(
            session,
            os.urandom(32).hex(),
            ep.cert_pem,
            list(ep.config.peering.advertise),
            nat,
            paths,
            udp[1] if udp else None,
            tcp[1] if tcp else None,
        )
        return offer, udp[0] if udp else None

    async def _tcp_mapping(self) -> tuple[int, list[object]] | None:
        from tether.endpoint._tcp_punch import tcp_mapping

        relay = self.ep.relay
        assert relay is not None
        return await tcp_mapping(relay.address[0], relay.registered.data_port)

    async def _udp_mapping(self, token: bytes) -> tuple[Any, list[Any]] | None:
        from tether.endpoint._udp import UdpSession

        relay = self.ep.relay
        assert relay is not None
        session = await UdpSession.open(token)
        mapping = await session.probe((relay.address[0], relay.registered.udp_ports[0]))
        if mapping is None:
            session.close()
            return None
        return session, list(mapping)

    async def _peer(self, target: str) -> PeerLink:
        relay = self.ep.relay
        if relay is None:
            raise PeeringError(
                f'endpoint {self.ep.config.name} has no relay configured, so it cannot reach '
                f'endpoint {target}: set relay.address in its endpoint.toml',
            )
        paths: list[str] = [str(p) for p in self.ep.config.peering.paths]
        errors: list[str] = []
        while paths:
            session = os.urandom(16).hex()
            offer, udp = await self._offer(paths, session)
            try:
                reply = await relay.call(rp.Connect(target, encode(offer)), rp.Connected)
                got = reply.answer
                if got.answer is None or got.error is not None:
                    raise PeeringError(f'endpoint {target} refused to peer: {got.error}')
                answer = decode_answer(got.answer)
            except (EndpointError, WireError, PeeringError) as e:
                if udp is not None:
                    udp.close()
                if isinstance(e, PeeringError):
                    raise
                raise PeeringError(f'cannot reach endpoint {target} through the relay: {e}') from e
            uuid, name = reply.uuid, reply.name
            path = choose_path(paths, offer, answer)
            if path != 'punched' and udp is not None:
                udp.close()
            t0 = time.perf_counter()
            try:
                link = await self._open(path, uuid, name, offer, answer, udp)
            except (WireError, OSError, PeeringError, EndpointError, RemoteError) as e:
                logger.warning('peering with %s over the %s path failed: %s', name, path, e)
                errors.append(f'{path}: {e}')
                paths.remove(path)
                if udp is not None:
                    udp.close()
                continue
            # Not through the relay: its bandwidth is shared, and counted against the
            # user's forwarded bytes.
            link.warm_up = self.ep.warm_up if link.path != 'relayed' else 0
            try:
                await link.warm_idle()
            except (WireError, OSError) as e:
                logger.warning('warming the channel to %s up failed: %s', name, e)
                errors.append(f'{path}: {e}')
                link.close()
                paths.remove(path)
                continue
            logger.info(
                'peered with %s (%s) over the %s path in %.3f s (warm-up: %s Mbit/s)',
                name,
                uuid,
                path,
                time.perf_counter() - t0,
                link.warm_rate,
            )
            self.links[uuid] = link
            self.names[name] = uuid
            self.names[target] = uuid
            self.lost.pop(uuid, None)
            return link
        raise PeeringError(f'no path to endpoint {target}: ' + '; '.join(errors))

    async def _open(  # noqa: PLR0917
        self,
        path: str,
        uuid: str,
        name: str,
        offer: PathOffer,
        answer: PathAnswer,
        udp: Any,
    ) -> PeerLink:
        secret = bytes.fromhex(offer.secret)
        client = f'peer:{self.ep.uuid}'
        cert = answer.cert
        keepalive = self.ep.config.peering.keepalive
        if path == 'direct':
            addresses = answer.direct
            ctx = pinned_client_context(cert)

            async def dial() -> Connection:
                last: Exception | None = None
                for address in addresses:
                    host, _, port = address.rpartition(':')
                    try:
                        conn = await connect(
                            host.strip('[]'),
                            int(port),
                            secret=secret,
                            ssl=ctx,
                            timeout=_DIAL_TIMEOUT,
                            client=client,
                        )
                    except (WireError, OSError) as e:
                        last = e
                    else:
                        tcp_keepalive(conn.transport.get_extra_info('socket'), keepalive)
                        return conn
                assert last is not None
                raise last

            return PeerLink(uuid, name, 'direct', dial, first=await dial())
        if path == 'punched':
            port = self._tcp_ports.pop(offer.session, None)
            if port is not None and answer.tcp:
                try:
                    return await self._open_punched_tcp(
                        uuid, name, secret, cert, (port, answer.tcp), client
                    )
                except (WireError, OSError, PeeringError) as e:
                    if 'udp' not in self.ep.config.peering.punch:
                        raise
                    logger.info('TCP hole punching to %s failed (%s): trying UDP', name, e)
            if 'udp' not in self.ep.config.peering.punch:
                raise PeeringError(f'{name} cannot take a punched TCP channel')
            return await self._open_punched(uuid, name, secret, cert, answer, udp, client)
        return await self._open_relayed(uuid, name, offer.session, secret, cert, client)

    async def _open_punched_tcp(  # noqa: PLR0917
        self,
        uuid: str,
        name: str,
        secret: bytes,
        cert: str,
        ports: tuple[int, Any],
        client: str,
    ) -> PeerLink:
        from tether.endpoint._tcp_punch import simultaneous_open

        peer = (str(ports[1][0]), int(ports[1][1]))
        sock = await simultaneous_open(ports[0], peer, _TCP_PUNCH_TIMEOUT)
        tcp_keepalive(sock, self.ep.config.peering.keepalive)
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.create_connection(
                client_protocol,
                sock=sock,
                ssl=pinned_client_context(cert),
                server_hostname='',
                ssl_handshake_timeout=10,
            )
        except (OSError, ConnectionError) as e:
            sock.close()
            raise PeeringError(f'TLS over the punched TCP connection failed: {e!r}') from e
        first = await client_handshake(transport, protocol, secret=secret, client=client)

        async def reopen() -> Connection:
            raise PeeringError('a punched TCP channel cannot be reopened: peering again')

        return PeerLink(uuid, name, 'punched', reopen, first=first, max_channels=1)

    async def _open_punched(  # noqa: PLR0917
        self,
        uuid: str,
        name: str,
        secret: bytes,
        cert: str,
        answer: PathAnswer,
        udp: Any,
        client: str,
    ) -> PeerLink:
        from aioquic.quic.connection import QuicConnection

        from tether.endpoint._udp import QuicPeer, quic_config

        assert answer.udp is not None
        peer_addr = (str(answer.udp[0]), int(answer.udp[1]))
        heard = await udp.punch(peer_addr, _PUNCH_TIMEOUT)
        if heard is None:
            raise PeeringError(f'no punch datagram from {peer_addr[0]}:{peer_addr[1]} arrived')
        keepalive = self.ep.config.peering.keepalive
        config = quic_config(
            client=True,
            peer_cert=cert,
            server_name=f'{uuid}.endpoint.tether',
            keepalive=keepalive,
        )
        quic = QuicPeer(udp, QuicConnection(configuration=config), heard, keepalive=keepalive)
        udp.quic = quic
        await quic.connect(_QUIC_TIMEOUT)

        async def stream() -> Connection:
            protocol = client_protocol()
            transport = quic.open_stream(protocol)
            return await client_handshake(
                transport, protocol, secret=secret, timeout=_QUIC_TIMEOUT, client=client
            )

        first = await stream()
        return PeerLink(
            uuid,
            name,
            'punched',
            stream,
            udp.close,
            lambda: quic.alive,
            lambda: f'its QUIC connection closed: {quic.reason}',
            first=first,
            transport='quic',
        )

    async def _open_relayed(  # noqa: PLR0917
        self, uuid: str, name: str, session: str, secret: bytes, cert: str, client: str
    ) -> PeerLink:
        relay = self.ep.relay
        assert relay is not None
        ctx = pinned_client_context(cert)
        keepalive = self.ep.config.peering.keepalive

        async def tunnel() -> Connection:
            reply = await relay.call(rp.Tunnel(uuid, session), rp.Ticket)
            ticket = bytes.fromhex(reply.ticket)
            port = relay.registered.data_port
            transport = await tunnel_transport(relay.address[0], port, ticket, keepalive)
            protocol = client_protocol()
            loop = asyncio.get_running_loop()
            try:
                tls = await loop.start_tls(
                    transport, protocol, ctx, server_hostname=None, ssl_handshake_timeout=10
                )
            except (OSError, TimeoutError, ConnectionError) as e:
                transport.abort()
                raise PeeringError(f'TLS through the relay to {name} failed: {e!r}') from e
            assert tls is not None
            protocol.connection_made(tls)
            return await client_handshake(tls, protocol, secret=secret, client=client)

        return PeerLink(uuid, name, 'relayed', tunnel, first=await tunnel())

    # Responder -------------------------------------------------------------------------

    async def on_offer(self, message: rp.Offer) -> dict[str, Any]:
        """Answer a peering offer pushed by the relay (the relay vouches for the user).

        Raises:
            ProtocolError: the offer is malformed (the relay tells the initiator).
        """
        peer = message.sender
        offer = decode_offer(message.offer)
        inbound = _Inbound(peer, offer.session, bytes.fromhex(offer.secret), offer.cert)
        old = self._inbound.get(peer)
        if old is not None and old.udp is not None:
            old.udp.close()
        self._inbound[peer] = inbound
        self._by_session[inbound.session] = inbound
        self.names[message.name] = peer
        ep = self.ep
        paths = offer.paths
        answer = PathAnswer(
            ep.cert_pem, list(ep.config.peering.advertise), str(self.nat.get('nat', 'unknown'))
        )
        if (
            'punched' in paths
            and offer.udp
            and answer.nat in ('cone', 'open')
            and not ('direct' in paths and answer.direct)
        ):
            udp = await self._udp_mapping(bytes.fromhex(inbound.session))
            if udp is not None:
                answer = answer._replace(udp=udp[1])
                inbound.udp = udp[0]
            if offer.tcp:
                tcp = await self._tcp_mapping()
                if tcp is not None:
                    answer = answer._replace(tcp=tcp[1])
                    inbound.tcp_port = tcp[0]
        path = choose_path(paths, offer, answer)
        if path == 'punched':
            if inbound.tcp_port is not None and offer.tcp:
                peer_tcp = (str(offer.tcp[0]), int(offer.tcp[1]))
                self._spawn(self._accept_punched_tcp(inbound, peer_tcp))
            assert offer.udp is not None
            self._spawn(self._accept_punched(inbound, (str(offer.udp[0]), int(offer.udp[1]))))
        elif inbound.udp is not None:
            inbound.udp.close()
            inbound.udp = None
        logger.info('answered the offer of %s (%s path)', message.name, path)
        return encode(answer)

    async def _accept_punched_tcp(self, inbound: _Inbound, peer: tuple[str, int]) -> None:
        from tether.endpoint._tcp_punch import simultaneous_open

        assert inbound.tcp_port is not None
        try:
            sock = await simultaneous_open(inbound.tcp_port, peer, _TCP_PUNCH_TIMEOUT + 1)
        except PeeringError as e:
            logger.info('TCP hole punching from %s failed: %s', inbound.peer, e)
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(
                self.ep.peer_server.protocol,
                sock,
                ssl=self.ep.server_ssl,
                ssl_handshake_timeout=10,
            )
        except (OSError, ConnectionError) as e:
            sock.close()
            logger.info('TLS over the punched TCP connection from %s failed: %r', inbound.peer, e)

    async def _accept_punched(self, inbound: _Inbound, peer_addr: tuple[str, int]) -> None:
        from aioquic._buffer import Buffer
        from aioquic.quic.connection import QuicConnection
        from aioquic.quic.packet import QuicPacketType, pull_quic_header

        from tether.endpoint._udp import QuicPeer, quic_config

        udp = inbound.udp
        ep = self.ep
        keepalive = ep.config.peering.keepalive
        config = quic_config(
            client=False, cert_file=ep.cert_file, key_file=ep.key_file, keepalive=keepalive
        )

        def on_stream(transport: Any) -> None:
            protocol = ep.peer_server.protocol()
            transport.protocol = protocol
            protocol.connection_made(transport)

        def accept(data: bytes, addr: tuple[str, int]) -> QuicPeer | None:
            try:
                header = pull_quic_header(Buffer(data=data), host_cid_length=8)
            except ValueError:
                return None
            if header.packet_type != QuicPacketType.INITIAL:
                return None
            quic = QuicConnection(
                configuration=config, original_destination_connection_id=header.destination_cid
            )
            return QuicPeer(udp, quic, addr, on_stream, keepalive=keepalive)

        udp.accept = accept
        heard = await udp.punch(peer_addr, _PUNCH_TIMEOUT + 2)
        if heard is None:
            logger.warning('no punch datagram from %s:%d arrived', *peer_addr)

    async def on_tunnel(self, message: rp.TunnelOpen) -> None:
        """Open our side of a relayed channel the peer asked for."""
        inbound = self._by_session.get(message.session)
        if inbound is None or inbound.peer != message.sender:
            logger.warning('relayed channel for an unknown session from %s', message.sender)
            return
        relay = self.ep.relay
        assert relay is not None
        ticket = bytes.fromhex(message.ticket)
        keepalive = self.ep.config.peering.keepalive
        try:
            port = relay.registered.data_port
            transport = await tunnel_transport(relay.address[0], port, ticket, keepalive)
            protocol = self.ep.peer_server.protocol()
            loop = asyncio.get_running_loop()
            tls = await loop.start_tls(
                transport,
                protocol,
                self.ep.server_ssl,
                server_side=True,
                ssl_handshake_timeout=10,
            )
        except (OSError, TimeoutError, ConnectionError) as e:
            logger.warning('relayed channel from %s failed: %r', inbound.peer, e)
            return
        assert tls is not None
        protocol.connection_made(tls)

    # Status and shutdown ---------------------------------------------------------------

    def info(self) -> list[dict[str, Any]]:
        """Every outbound link (what ``tether endpoint list --json`` shows as peers)."""
        # A copy first: a metrics scrape reads this in its own thread while the event
        # loop adds and drops links.
        return [link.info() for link in list(self.links.values())]

    def close(self) -> None:
        """Close every link and inbound UDP session."""
        for link in self.links.values():
            link.close()
        for inbound in self._inbound.values():
            if inbound.udp is not None:
                inbound.udp.close()
        for task in list(self._tasks):
            task.cancel()

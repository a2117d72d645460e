"""Endpoints across NATs (figures 3.13 and 3.14), beside ProxyStore's and Redis over SSH.

Run as root from the repository root (it builds network namespaces):

    bash benchmarks/peer_endpoints_env.sh          # once: the peer venv and Debian packages
    .venv/bin/python benchmarks/bench_endpoints.py [--rtts 1,20] [--quick]

For each round trip time it builds the topology of ``tests/endpoint/_topology.py``
(site-a and site-b behind cone NATs, site-c behind a symmetric NAT, 1 Gbit/s uplinks,
half the round trip added on each router's uplink), then in that one topology:

* tether: a relay (TLS) in the public namespace; at site-a the endpoints ``ea`` (every
  path) and ``ea-relay`` (relayed only); at site-b ``eb-direct`` (reachable through a
  port forward of its NAT) and ``eb-nat`` (not reachable); at site-c ``ec``. Remote rows:
  direct = ea -> eb-direct, punched = ea -> eb-nat, relayed = ea-relay -> eb-nat; and
  ea -> ec (relayed, the symmetric NAT).
* the published ProxyStore 1.1.0 endpoints (peer venv) with their relay and a STUN
  server (coturn) in the public namespace, endpoints at site-a, site-b and site-c.
* Redis on site-b's host reached from site-a through ``ssh -L`` (sshd behind nat-b's port
  forward), the seed's own comparison.
* interleaved: tether's direct path and Redis over SSH, one operation of each in turn
  (their order flipping every time), so that both see the same link and load.
* local rows (figure 3.13): 1-8 client processes at site-a against their own endpoint,
  tether and peer.

Writes ``benchmarks/results/endpoints.json`` and prints the tables.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.endpoint._topology import PUBLIC, Topology  # noqa: E402

TETHER = str(Path(sys.executable).parent / 'tether')
WORKER = str(ROOT / 'benchmarks' / 'endpoints_worker.py')


def _peer_python() -> str:
    """The peer venv's python, as ``peer_endpoints_env.sh`` places it (nothing is built)."""
    out = subprocess.run(
        ['bash', str(ROOT / 'benchmarks' / 'peer_endpoints_env.sh')],
        env={**os.environ, 'PEER_VENV_PRINT_ONLY': '1'},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.strip().splitlines()[-1]


PEER_PY = _peer_python()
PEER_VENV = Path(PEER_PY).parent.parent
TOKEN = 'bench-alice-token-0123456789abcdef'
PEER_PORT = 7500
SSH_PORT = 2222
LINK_PORT = 7600

# The link's own capacity, as one plain TCP connection sees it: site-b receives, site-a
# sends 100 MB at a time and waits for a one-byte acknowledgement, on a new connection
# each time and then three times on one connection (as tether's channels are reused).
_LINK_SINK = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen()
buf = bytearray(1 << 20)
while True:
    c, _ = s.accept()
    while True:
        n = 0
        while n < 100_000_000:
            k = c.recv_into(buf)
            if not k:
                break
            n += k
        if n < 100_000_000:
            break
        c.sendall(b'k')
    c.close()
"""
_LINK_SOURCE = """
import json, socket, sys, time
data = memoryview(bytearray(100_000_000))
out = {'fresh_s': [], 'reused_s': []}
for i in range(3):
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
    t = time.perf_counter(); c.sendall(data); c.recv(1)
    out['fresh_s'].append(time.perf_counter() - t)
    c.close()
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
for i in range(3):
    t = time.perf_counter(); c.sendall(data); c.recv(1)
    out['reused_s'].append(time.perf_counter() - t)
c.close()
print(json.dumps(out))
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Run:
    """Processes of one topology, all killed by ``Topology.down``."""

    def __init__(self, topo: Topology, work: Path) -> None:
        self.topo = topo
        self.work = work
        self.logs = work / 'logs'
        self.logs.mkdir(parents=True, exist_ok=True)
        self.procs: list[subprocess.Popen[Any]] = []

    def bg(self, name: str, ns: str, cmd: list[str], env: dict[str, str] | None = None) -> Any:
        out = open(self.logs / f'{name}.log', 'ab')  # noqa: SIM115 - owned by the process
        proc = subprocess.Popen(
            ['ip', 'netns', 'exec', ns, *cmd], stdout=out, stderr=out, env=env or os.environ
        )
        out.close()
        self.procs.append(proc)
        return proc

    def run(
        self, ns: str, cmd: list[str], env: dict[str, str] | None = None, timeout: float = 900
    ) -> str:
        out = subprocess.run(
            ['ip', 'netns', 'exec', ns, *cmd],
            capture_output=True,
            text=True,
            env=env or os.environ,
            timeout=timeout,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f'{" ".join(cmd[:4])} failed: {out.stderr[-3000:]}')
        if out.stderr:
            (self.logs / 'workers.log').open('a').write(out.stderr)
            sys.stderr.write(out.stderr)
        return out.stdout

    def wait_port(self, ns: str, host: str, port: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ok = subprocess.run(
                ['ip', 'netns', 'exec', ns, 'bash', '-c', f'exec 3<>/dev/tcp/{host}/{port}'],
                capture_output=True,
                check=False,
            )
            if ok.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError(f'{host}:{port} in {ns} did not open')

    def stop_all(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)


# tether -------------------------------------------------------------------------------


def tether_setup(r: Run) -> dict[str, Any]:
    from tether.relay import hash_token, make_self_signed

    topo, work = r.topo, r.work
    rdir = work / 'relay'
    rdir.mkdir()
    cert, key = make_self_signed('relay.bench', [PUBLIC])
    (rdir / 'relay.pem').write_text(cert)
    (rdir / 'relay.key').write_text(key)
    (rdir / 'relay.toml').write_text(
        f'host = "{PUBLIC}"\nport = 8700\ndata_port = 8701\nudp_port = 8700\n'
        'tls_cert = "relay.pem"\ntls_key = "relay.key"\n'
        f'[[users]]\nname = "alice"\ntoken_sha256 = "{hash_token(TOKEN)}"\n'
    )
    r.bg('tether-relay', topo.pub, [TETHER, 'relay', '--config', str(rdir / 'relay.toml')])
    r.wait_port(topo.pub, PUBLIC, 8700)
    (work / 'token').write_text(TOKEN)
    uuids: dict[str, str] = {}
    plan = {
        'a': [('ea', []), ('ea-relay', ['--paths', 'relayed'])],
        'b': [
            (
                'eb-direct',
                ['--peer-port', str(PEER_PORT), '--advertise', f'{topo.public["b"]}:{PEER_PORT}'],
            ),
            ('eb-nat', []),
        ],
        'c': [('ec', [])],
    }
    homes = {}
    for site, endpoints in plan.items():
        home = work / f'tether-{site}'
        homes[site] = home
        env = {**os.environ, 'TETHER_HOME': str(home)}
        for name, extra in endpoints:
            out = r.run(
                topo.site[site],
                [
                    TETHER,
                    'endpoint',
                    'configure',
                    name,
                    '--relay',
                    f'{PUBLIC}:8700',
                    '--relay-ca',
                    str(rdir / 'relay.pem'),
                    '--relay-token-file',
                    str(work / 'token'),
                    '--memory',
                    '4GB',
                    '--json',
                    *extra,
                ],
                env,
            )
            uuids[name] = json.loads(out)['uuid']
            r.run(topo.site[site], [TETHER, 'endpoint', 'start', name], env)
    return {'uuids': uuids, 'homes': homes}


def tether_nat(r: Run, t: dict[str, Any]) -> dict[str, str]:
    out = {}
    for site, name in (('a', 'ea'), ('b', 'eb-nat'), ('c', 'ec')):
        env = {**os.environ, 'TETHER_HOME': str(t['homes'][site])}
        info = json.loads(
            r.run(r.topo.site[site], [TETHER, 'endpoint', 'check-nat', name, '--json'], env)
        )
        out[site] = info['nat']
    return out


def tether_remote(r: Run, t: dict[str, Any], local: str, remote: str, sizes: str) -> Any:
    env = {**os.environ, 'TETHER_HOME': str(t['homes']['a'])}
    out = r.run(
        r.topo.site['a'],
        [
            sys.executable,
            WORKER,
            '--backend',
            'tether',
            '--local',
            local,
            '--remote',
            t['uuids'][remote],
            '--sizes',
            sizes,
        ],
        env,
    )
    result = json.loads(out.strip().splitlines()[-1])
    peers = json.loads(r.run(r.topo.site['a'], [TETHER, 'endpoint', 'list', '--json'], env))
    row = next(p for p in peers if p['name'] == local)
    result['path'] = next(
        (p['path'] for p in row.get('peers', []) if p['uuid'] == t['uuids'][remote]), None
    )
    return result


# the peer -----------------------------------------------------------------------------


def peer_setup(r: Run) -> dict[str, Any]:
    topo, work = r.topo, r.work
    turn = work / 'turn'
    turn.mkdir()
    r.bg(
        'peer-stun',
        topo.pub,
        [
            'turnserver',
            '-n',
            f'--listening-ip={PUBLIC}',
            '--listening-port=3478',
            '--no-tls',
            '--no-dtls',
            '--no-cli',
            '--stun-only',
            f'--pidfile={turn}/pid',
            '--log-file=stdout',
            '--simple-log',
        ],
    )
    r.bg(
        'peer-relay',
        topo.pub,
        [str(PEER_VENV / 'bin' / 'proxystore-relay'), '--host', PUBLIC, '--port', '8710'],
    )
    r.wait_port(topo.pub, PUBLIC, 8710)
    uuids = {}
    homes = {}
    for site in 'abc':
        home = work / f'peer-{site}'
        home.mkdir()
        homes[site] = home
        env = {**os.environ, 'PROXYSTORE_HOME': str(home), 'HOME': str(home)}
        name = f'p{site}'
        r.run(
            topo.site[site],
            [
                str(PEER_VENV / 'bin' / 'proxystore-endpoint'),
                'configure',
                name,
                '--host',
                topo.address[site],
                '--port',
                '8765',
                '--relay-address',
                f'ws://{PUBLIC}:8710',
                '--no-relay-auth',
                '--no-persist',
            ],
            env,
        )
        # Its documented relay.ice_servers field: our STUN server only (the default
        # public ones are unreachable here).
        uuids[name] = r.run(
            topo.site[site],
            [
                PEER_PY,
                '-c',
                'import sys\n'
                'from proxystore.endpoint.config import read_config, write_config, '
                'EndpointRelayICEServerConfig as S\n'
                'd = sys.argv[1]; c = read_config(d)\n'
                f'c.relay.ice_servers = [S(urls="stun:{PUBLIC}:3478")]\n'
                'write_config(c, d); print(c.uuid)\n',
                str(home / name),
            ],
            env,
        ).strip()
        r.bg(
            f'peer-endpoint-{site}',
            topo.site[site],
            [str(PEER_VENV / 'bin' / 'proxystore-endpoint'), 'start', name, '--no-detach'],
            env,
        )
    for site in 'abc':
        r.wait_port(topo.site[site], topo.address[site], 8765)
    return {'uuids': uuids, 'homes': homes}


def peer_worker(r: Run, p: dict[str, Any], args: list[str], timeout: float = 900) -> Any:
    env = {**os.environ, 'PROXYSTORE_HOME': str(p['homes']['a']), 'HOME': str(p['homes']['a'])}
    out = r.run(r.topo.site['a'], [PEER_PY, WORKER, '--backend', 'peer', *args], env, timeout)
    return json.loads(out.strip().splitlines()[-1])


# Redis over SSH -----------------------------------------------------------------------


def ssh_tunnel(r: Run) -> None:
    """Redis on site-b's host, and an ``ssh -L`` from site-a to it: site-a's
    127.0.0.1:16379 reaches it (sshd behind nat-b's port forward)."""
    topo, work = r.topo, r.work
    d = work / 'ssh'
    d.mkdir()
    for key in ('host', 'client'):
        subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f', str(d / key)],
                       check=True)  # fmt: skip
    shutil.copy(d / 'client.pub', d / 'authorized_keys')
    (d / 'sshd_config').write_text(
        f'ListenAddress {topo.address["b"]}:{SSH_PORT}\nHostKey {d}/host\nPidFile {d}/pid\n'
        f'AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\n'
        'PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n'
        'StrictModes no\nAllowTcpForwarding yes\nX11Forwarding no\nUseDNS no\n'
    )
    redis = ['redis-server', '--bind', '127.0.0.1', '--port', '6379', '--save', '']
    r.bg('redis', topo.site['b'], [*redis, '--appendonly', 'no', '--dir', str(work)])
    r.bg('sshd', topo.site['b'], ['/usr/sbin/sshd', '-D', '-e', '-f', str(d / 'sshd_config')])
    r.wait_port(topo.site['b'], '127.0.0.1', 6379)
    r.wait_port(topo.site['b'], topo.address['b'], SSH_PORT)
    r.bg(
        'ssh-tunnel',
        topo.site['a'],
        [
            'ssh',
            '-F',
            '/dev/null',
            '-i',
            str(d / 'client'),
            '-o',
            'IdentitiesOnly=yes',
            '-o',
            f'UserKnownHostsFile={d}/known_hosts',
            '-o',
            'StrictHostKeyChecking=no',
            '-o',
            'BatchMode=yes',
            '-o',
            'ExitOnForwardFailure=yes',
            '-N',
            '-L',
            '127.0.0.1:16379:127.0.0.1:6379',
            '-p',
            str(SSH_PORT),
            f'root@{topo.public["b"]}',
        ],
    )
    r.wait_port(topo.site['a'], '127.0.0.1', 16379)


@contextlib.contextmanager
def run_sshd_dir() -> Any:
    """``/run/sshd`` (sshd's privilege-separation directory) while sshd runs, if absent."""
    made = not Path('/run/sshd').exists()
    if made:
        Path('/run/sshd').mkdir(mode=0o755)
    try:
        yield
    finally:
        if made:
            with contextlib.suppress(OSError):
                Path('/run/sshd').rmdir()


def interleaved(r: Run, t: dict[str, Any], sizes: str, reps: int | None = None) -> Any:
    """tether's direct path and Redis over SSH, one operation of each in turn."""
    env = {**os.environ, 'TETHER_HOME': str(t['homes']['a'])}
    extra = [] if reps is None else ['--reps', str(reps)]
    mixed = r.run(
        r.topo.site['a'],
        [sys.executable, WORKER, '--backend', 'tether', '--phase', 'interleaved',
         '--local', 'ea', '--remote', t['uuids']['eb-direct'], '--sizes', sizes, *extra],
        env,
    )  # fmt: skip
    return json.loads(mixed.strip().splitlines()[-1])['interleaved']


def redis_ssh(
    r: Run, sizes: str, t: dict[str, Any] | None = None, pairs: int | None = None
) -> Any:
    """Redis at site-b through ``ssh -L`` from site-a; then, with ``t`` (tether's setup),
    the direct path and the tunnel interleaved operation by operation."""
    with run_sshd_dir():
        ssh_tunnel(r)
        out = r.run(
            r.topo.site['a'], [sys.executable, WORKER, '--backend', 'redis', '--sizes', sizes]
        )
        result = json.loads(out.strip().splitlines()[-1])
        if t is not None:
            log('-- tether direct and Redis over SSH, interleaved')
            result['interleaved'] = interleaved(r, t, sizes, pairs)
        return result


def link_capacity(r: Run) -> Any:
    """100 MB over one plain TCP connection, site-a to site-b: what the link carries."""
    topo = r.topo
    r.bg('link-sink', topo.site['b'], ['python3', '-c', _LINK_SINK, topo.address['b'],
                                         str(LINK_PORT)])  # fmt: skip
    r.wait_port(topo.site['b'], topo.address['b'], LINK_PORT)
    out = r.run(topo.site['a'], ['python3', '-c', _LINK_SOURCE, topo.public['b'], str(LINK_PORT)])
    res = json.loads(out.strip().splitlines()[-1])
    for k in ('fresh_s', 'reused_s'):
        log(f'  raw TCP 100MB ({k[:-2]} connection): {min(res[k]) * 1e3:.1f} ms best, '
            f'{100 / min(res[k]):.1f} MB/s')  # fmt: skip
    return res


# Driver -------------------------------------------------------------------------------


def phase(result: dict[str, Any], name: str, fn: Any, *a: Any) -> Any:
    """Run one measurement; a failure (or timeout) is recorded, not fatal."""
    try:
        value = fn(*a)
    except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
        log(f'   {name} failed: {e}'[:500])
        value = {'error': f'{type(e).__name__}: {e}'[:2000]}
    result[name] = value
    return value


def one_topology(rtt_ms: float, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    topo = Topology(work / 'build', rate='1gbit', delay_ms=rtt_ms / 2,
                    forwards=(PEER_PORT, SSH_PORT, LINK_PORT))  # fmt: skip
    result: dict[str, Any] = {'rtt_ms': rtt_ms, 'rate': '1gbit'}
    with topo:
        r = Run(topo, work)
        try:
            ping = topo.x(topo.site['a'], 'ping', '-n', '-q', '-c', '10', '-i', '0.05',
                          topo.public['b']).stdout.strip().splitlines()[-1]  # fmt: skip
            result['ping_a_to_natb'] = ping
            log(f'== RTT {rtt_ms} ms: {ping}')
            phase(result, 'link', link_capacity, r)
            t = tether_setup(r)
            result['tether_nat'] = tether_nat(r, t)
            log(f'tether NAT types: {result["tether_nat"]}')
            sizes = args.sizes
            result['tether'] = {}
            for label, local, remote, which in (
                ('direct', 'ea', 'eb-direct', sizes),
                ('punched', 'ea', 'eb-nat', sizes),
                ('relayed', 'ea-relay', 'eb-nat', sizes),
                ('symmetric', 'ea', 'ec', '1KB,1MB,10MB'),
            ):
                log(f'-- tether {label}')
                phase(result['tether'], label, tether_remote, r, t, local, remote, which)
            if args.local:
                env = {**os.environ, 'TETHER_HOME': str(t['homes']['a'])}
                log('-- tether local clients')
                out = r.run(
                    topo.site['a'],
                    [
                        sys.executable,
                        WORKER,
                        '--backend',
                        'tether',
                        '--phase',
                        'local',
                        '--local',
                        'ea',
                        '--sizes',
                        args.local_sizes,
                        '--clients',
                        args.clients,
                    ],
                    env,
                )
                result['tether_local'] = json.loads(out.strip().splitlines()[-1])['local']
            if not args.no_peer:
                log('-- peer (ProxyStore 1.1.0) endpoints')
                p = peer_setup(r)
                phase(
                    result,
                    'peer',
                    peer_worker,
                    r,
                    p,
                    ['--local', p['uuids']['pa'], '--remote', p['uuids']['pb'], '--sizes', sizes],
                )
                if args.symmetric_peer:
                    log('-- peer to the symmetric NAT (site-c)')
                    result['peer_symmetric'] = peer_worker(
                        r,
                        p,
                        [
                            '--local',
                            p['uuids']['pa'],
                            '--remote',
                            p['uuids']['pc'],
                            '--sizes',
                            '1KB',
                            '--budget',
                            '60',
                        ],
                    )
                if args.local:
                    log('-- peer local clients')
                    result['peer_local'] = peer_worker(
                        r,
                        p,
                        [
                            '--phase',
                            'local',
                            '--local',
                            p['uuids']['pa'],
                            '--remote',
                            p['uuids']['pb'],
                            '--sizes',
                            args.local_sizes,
                            '--clients',
                            args.clients,
                        ],
                    )['local']
            log('-- Redis over SSH')
            phase(result, 'redis_ssh', redis_ssh, r, sizes, t, args.pairs)
        finally:
            r.stop_all()
    return result


def table(results: list[dict[str, Any]]) -> str:
    def med(xs: list[float]) -> float | None:
        import statistics

        return statistics.median(xs) if xs else None

    lines = []
    for res in results:
        lines.append(f'\n### RTT {res["rtt_ms"]} ms, {res["rate"]}\n')
        names = ('direct', 'punched', 'relayed', 'peer', 'redis+ssh')
        lines.append('| size | ' + ' | '.join(f'{k} set ms | {k} get ms' for k in names) + ' |')
        lines.append('|---' * 11 + '|')
        sources = {
            'direct': res.get('tether', {}).get('direct', {}),
            'punched': res.get('tether', {}).get('punched', {}),
            'relayed': res.get('tether', {}).get('relayed', {}),
            'peer': res.get('peer', {}),
            'redis+ssh': res.get('redis_ssh', {}),
        }
        for label in ('1KB', '100KB', '1MB', '10MB', '100MB'):
            cells = []
            for src in sources.values():
                row = src.get('rows', {}).get(label)
                for op in ('set_s', 'get_s'):
                    m = med(row[op]) if row else None
                    cells.append(f'{m * 1e3:.1f}' if m is not None else '-')
            lines.append(f'| {label} | ' + ' | '.join(cells) + ' |')
        mixed = res.get('redis_ssh', {}).get('interleaved')
        if mixed:
            lines.append(
                '\nInterleaved, one operation of each in turn (median ms, set / get):\n\n'
                '| size | tether direct | Redis over SSH | tether / Redis, get |\n'
                '|---|---|---|---|'
            )
            for label, row in mixed.items():
                ts, tg = med(row['tether']['set_s']) or 0, med(row['tether']['get_s']) or 0
                rs, rg = med(row['redis']['set_s']) or 0, med(row['redis']['get_s']) or 1
                lines.append(
                    f'| {label} | {ts * 1e3:.2f} / {tg * 1e3:.2f} | {rs * 1e3:.2f} / '
                    f'{rg * 1e3:.2f} | {tg / rg:.3f} |'
                )
        link = res.get('link', {})
        if link.get('fresh_s'):
            for k in ('fresh_s', 'reused_s'):
                best = med(link[k])
                assert best is not None
                lines.append(
                    f'\nraw TCP, 100 MB, {k[:-2]} connection: {best * 1e3:.1f} ms median '
                    f'= {100 / best:.1f} MB/s ({100 / best / 1.25:.0f}% of 1 Gbit/s)'
                )
        for name in ('tether_local', 'peer_local'):
            rows = res.get(name)
            if not rows:
                continue
            lines.append(f'\n{name}: set/get median ms, ops/s')
            for key, row in rows.items():
                s, g = med(row['set_s']), med(row['get_s'])
                lines.append(
                    f'  {key:>10}: set {s * 1e3 if s else 0:.3f} get {g * 1e3 if g else 0:.3f} '
                    f'{row["ops_per_s"]:.0f} ops/s'
                )
    return '\n'.join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument('--rtts', default='20,1', help='round trip times (ms) site to site')
    ap.add_argument('--sizes', default='1KB,100KB,1MB,10MB,100MB')
    ap.add_argument('--local-sizes', default='1KB,100KB,1MB,10MB,100MB')
    ap.add_argument('--clients', default='1,2,4,8')
    ap.add_argument('--no-local', dest='local', action='store_false')
    ap.add_argument('--no-peer', action='store_true')
    ap.add_argument('--symmetric-peer', action='store_true', help='also try the peer to site-c')
    ap.add_argument(
        '--pairs', type=int, default=None, help='interleaved phase: pairs per size (default 60)'
    )
    ap.add_argument('--out', default=str(ROOT / 'benchmarks' / 'results' / 'endpoints.json'))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit('run as root (network namespaces)')
    if not args.no_peer and not Path(PEER_PY).exists():
        sys.exit('build the peer venv first: bash benchmarks/peer_endpoints_env.sh')
    results = []
    started = time.strftime('%Y-%m-%dT%H:%M:%S%z')
    load_before = os.getloadavg()
    for rtt in (float(x) for x in args.rtts.split(',')):
        work = Path(tempfile.mkdtemp(prefix='tether-bench-ep-'))
        try:
            one = one_topology(rtt, args, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        results.append(one)
        # Local clients do not depend on the link: measure them once.
        args.local = False
        save(args.out, started, load_before, results)
    save(args.out, started, load_before, results)
    print(table(results))
    print(f'\nload average before {load_before}, after {os.getloadavg()}; wrote {args.out}')


def save(out: str, started: str, load_before: Any, results: list[dict[str, Any]]) -> None:
    """Write what was measured so far."""
    doc = {
        'started': started,
        'finished': time.strftime('%Y-%m-%dT%H:%M:%S%z'),
        'load_before': load_before,
        'load_after': os.getloadavg(),
        'command': ' '.join(sys.argv),
        'results': results,
    }
    Path(out).write_text(json.dumps(doc, indent=1))


if __name__ == '__main__':
    main()

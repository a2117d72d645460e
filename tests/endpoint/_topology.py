"""A NAT test topology in network namespaces, for the endpoint tests and benchmarks.

```
                 ns pub: bridge br0, 203.0.113.1 (gateway), 203.0.113.10 (relay host)
        +----------------------+----------------------+
   nat-a up0 203.0.113.2   nat-b up0 203.0.113.3    nat-c up0 203.0.113.4
   MASQUERADE              MASQUERADE (+ port        MASQUERADE --random-fully
                           forwards to site-b)       (symmetric mapping)
   lan0 192.0.2.1/25       lan0 198.51.100.1/25     lan0 192.0.2.129/25
   site-a 192.0.2.10       site-b 198.51.100.10     site-c 192.0.2.138
```

Routers forward inbound traffic only for connections their side opened (conntrack
ESTABLISHED/RELATED) and drop everything else addressed to them, so site-a and site-b
sit behind port-restricted cone NATs (Linux keeps the source port) and site-c behind a
symmetric one. Each router's uplink egress is delayed by ``delay_ms`` (an NFQUEUE held
by ``nfq_delay``, built here: the kernel has no netem) and shaped to ``rate`` by
``tc tbf``: site to site the round trip is ``2 * delay_ms``, site to relay
``delay_ms``. Only documentation addresses are used and no namespace has a default
route. Namespace names carry a random tag so that concurrent runs never collide;
:meth:`Topology.down` removes everything, and is safe to call on any exit path.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

__all__ = ['SITES', 'Topology', 'build_delay_tool']

HERE = Path(__file__).resolve().parent
IPT = 'iptables-legacy'
SITES = {
    'a': ('203.0.113.2', '192.0.2.0/25', '192.0.2.1', '192.0.2.10', False),
    'b': ('203.0.113.3', '198.51.100.0/25', '198.51.100.1', '198.51.100.10', False),
    'c': ('203.0.113.4', '192.0.2.128/25', '192.0.2.129', '192.0.2.138', True),
}
PUBLIC = '203.0.113.10'


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command (bounded), raising with its stderr on failure."""
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    if check and out.returncode != 0:
        raise RuntimeError(f'{" ".join(args)} failed: {out.stderr.strip()}')
    return out


def build_delay_tool(build_dir: Path) -> Path:
    """Compile ``nfq_delay.c`` (needs gcc and libnetfilter-queue-dev)."""
    build_dir.mkdir(parents=True, exist_ok=True)
    exe = build_dir / 'nfq_delay'
    src = HERE / 'nfq_delay.c'
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        sh('gcc', '-O2', '-o', str(exe), str(src), '-lnetfilter_queue', '-lnfnetlink')
    return exe


class Topology:
    """The namespaces of one run; use as a context manager or call up() and down().

    Args:
        build_dir: Where the delay tool is built and its logs go.
        rate: Uplink rate of every router (``tc tbf``).
        delay_ms: One-way delay added on every router's uplink egress.
        forwards: TCP ports nat-b forwards from its public address to site-b.
    """

    def __init__(
        self,
        build_dir: Path,
        *,
        rate: str = '1gbit',
        delay_ms: float = 10.0,
        forwards: tuple[int, ...] = (),
    ) -> None:
        self.tag = uuid.uuid4().hex[:6]
        self.build_dir = build_dir
        self.rate = rate
        self.delay_ms = delay_ms
        self.forwards = forwards
        self.pub = f'te{self.tag}pub'
        self.router = {s: f'te{self.tag}n{s}' for s in SITES}
        self.site = {s: f'te{self.tag}s{s}' for s in SITES}
        self.address = {s: SITES[s][3] for s in SITES}
        self.public = {s: SITES[s][0] for s in SITES}
        self._made: list[str] = []
        self._delays: list[subprocess.Popen[bytes]] = []

    # Building --------------------------------------------------------------------------

    def _ns(self, name: str) -> None:
        sh('ip', 'netns', 'add', name)
        self._made.append(name)
        sh('ip', '-n', name, 'link', 'set', 'lo', 'up')
        self.x(name, 'sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1')

    def x(self, ns: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a command inside namespace ``ns``."""
        return sh('ip', 'netns', 'exec', ns, *cmd, check=check)

    def up(self) -> Topology:
        """Create everything (tears down what it made if a step fails)."""
        if os.geteuid() != 0:
            raise RuntimeError('the endpoint topology needs root (ip netns, iptables)')
        try:
            self._up()
        except BaseException:
            self.down()
            raise
        return self

    def _up(self) -> None:
        delay = build_delay_tool(self.build_dir) if self.delay_ms else None
        self._ns(self.pub)
        self.x(self.pub, 'sysctl', '-qw', 'net.ipv4.ip_forward=1')
        sh('ip', '-n', self.pub, 'link', 'add', 'br0', 'type', 'bridge')
        sh('ip', '-n', self.pub, 'addr', 'add', '203.0.113.1/24', 'dev', 'br0')
        sh('ip', '-n', self.pub, 'addr', 'add', f'{PUBLIC}/24', 'dev', 'br0')
        sh('ip', '-n', self.pub, 'link', 'set', 'br0', 'up')
        for s, (pub_ip, lan, router_ip, site_ip, symmetric) in SITES.items():
            r, n = self.router[s], self.site[s]
            self._ns(r)
            self._ns(n)
            self.x(r, 'sysctl', '-qw', 'net.ipv4.ip_forward=1')
            port = f'p{s}'
            sh('ip', 'link', 'add', 'up0', 'netns', r, 'type', 'veth', 'peer', 'name', port,
               'netns', self.pub)  # fmt: skip
            sh('ip', '-n', self.pub, 'link', 'set', port, 'master', 'br0', 'up')
            sh('ip', '-n', r, 'addr', 'add', f'{pub_ip}/24', 'dev', 'up0')
            sh('ip', '-n', r, 'link', 'set', 'up0', 'up')
            sh('ip', 'link', 'add', 'lan0', 'netns', r, 'type', 'veth', 'peer', 'name', 'eth0',
               'netns', n)  # fmt: skip
            sh('ip', '-n', r, 'addr', 'add', f'{router_ip}/25', 'dev', 'lan0')
            sh('ip', '-n', r, 'link', 'set', 'lan0', 'up')
            sh('ip', '-n', n, 'addr', 'add', f'{site_ip}/25', 'dev', 'eth0')
            sh('ip', '-n', n, 'link', 'set', 'eth0', 'up')
            for prefix in ('203.0.113.0/24', '198.51.100.0/24', '192.0.2.0/24'):
                sh('ip', '-n', n, 'route', 'add', prefix, 'via', router_ip)
            for prefix in ('198.51.100.0/24', '192.0.2.0/24'):
                sh('ip', '-n', r, 'route', 'add', prefix, 'via', '203.0.113.1')
            masq = ['-j', 'MASQUERADE'] + (['--random-fully'] if symmetric else [])
            self.x(r, IPT, '-t', 'nat', '-A', 'POSTROUTING', '-s', lan, '-o', 'up0', *masq)
            self.x(r, IPT, '-A', 'FORWARD', '-i', 'up0', '-o', 'lan0', '-m', 'conntrack',
                   '--ctstate', 'ESTABLISHED,RELATED', '-j', 'ACCEPT')  # fmt: skip
            if s == 'b':
                for fwd in self.forwards:
                    self.x(r, IPT, '-t', 'nat', '-A', 'PREROUTING', '-i', 'up0', '-p', 'tcp',
                           '--dport', str(fwd), '-j', 'DNAT', '--to-destination',
                           f'{site_ip}:{fwd}')  # fmt: skip
                    self.x(r, IPT, '-A', 'FORWARD', '-i', 'up0', '-o', 'lan0', '-p', 'tcp',
                           '-d', site_ip, '--dport', str(fwd), '-m', 'conntrack',
                           '--ctstate', 'DNAT', '-j', 'ACCEPT')  # fmt: skip
            self.x(r, IPT, '-A', 'FORWARD', '-i', 'up0', '-o', 'lan0', '-j', 'DROP')
            self.x(r, IPT, '-A', 'INPUT', '-i', 'up0', '-m', 'conntrack', '--ctstate',
                   'ESTABLISHED,RELATED', '-j', 'ACCEPT')  # fmt: skip
            self.x(r, IPT, '-A', 'INPUT', '-i', 'up0', '-p', 'icmp', '-j', 'ACCEPT')
            self.x(r, IPT, '-A', 'INPUT', '-i', 'up0', '-j', 'DROP')
            if delay is not None:
                self.x(r, IPT, '-t', 'mangle', '-A', 'POSTROUTING', '-o', 'up0', '-j',
                       'NFQUEUE', '--queue-num', '0')  # fmt: skip
                log = open(self.build_dir / f'nfq_delay-{s}.log', 'ab')  # noqa: SIM115
                self._delays.append(
                    subprocess.Popen(
                        [
                            'ip',
                            'netns',
                            'exec',
                            r,
                            str(delay),
                            '0',
                            str(int(self.delay_ms * 1000)),
                            '7200',
                        ],
                        stdout=log,
                        stderr=log,
                    ),
                )
                log.close()
            self.shape(s, self.rate)
        # Wait until every delay helper has bound its queue (a packet sent to an unbound
        # queue is dropped): the site -> relay ping must go through.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            ok = all(
                self.x(
                    self.site[s], 'ping', '-n', '-c', '1', '-W', '1', PUBLIC, check=False
                ).returncode
                == 0
                for s in SITES
            )
            if ok:
                return
            time.sleep(0.2)
        raise RuntimeError('the topology does not pass traffic (see nfq_delay logs)')

    def shape(self, site: str, rate: str) -> None:
        """Set the uplink rate of ``site``'s router."""
        r = self.router[site]
        self.x(r, 'tc', 'qdisc', 'del', 'dev', 'up0', 'root', check=False)
        self.x(r, 'tc', 'qdisc', 'add', 'dev', 'up0', 'root', 'tbf', 'rate', rate, 'burst',
               '512kb', 'latency', '50ms')  # fmt: skip

    # Tearing down ----------------------------------------------------------------------

    def down(self) -> None:
        """Kill every process in our namespaces and delete them (their links, rules go)."""
        for proc in self._delays:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        for proc in self._delays:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        for ns in reversed(self._made):
            pids = sh('ip', 'netns', 'pids', ns, check=False).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
        for ns in reversed(self._made):
            sh('ip', 'netns', 'del', ns, check=False)
        self._made.clear()
        self._delays.clear()

    def __enter__(self) -> Topology:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    def clean_build(self) -> None:
        shutil.rmtree(self.build_dir, ignore_errors=True)

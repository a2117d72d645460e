"""Where a small request's time goes: tether's direct path beside Redis over SSH, hop by hop.

Run as root from the repository root (it builds network namespaces):

    .venv/bin/python benchmarks/bench_endpoint_hops.py [--rtt 1] [--reps 60]

In the topology of ``bench_endpoints.py`` (one round trip time), with tether's relay and
the endpoints ``ea`` (site-a) and ``eb-direct`` (site-b, reached through nat-b's port
forward), and Redis at site-b behind sshd with an ``ssh -L`` tunnel from site-a, tcpdump
captures every TCP packet in site-a's and site-b's namespaces while
``endpoints_worker.py --phase interleaved`` runs 1 KB set/get/evict operations of each
system in turn. Each operation is then cut at its data packets, by the kernel's capture
times (one clock for every namespace):

* tether: client -> ea (loopback), ea -> link, link -> eb, eb -> link, link -> ea,
  ea -> client;
* SSH: client -> ssh (loopback), ssh -> link, link -> sshd, sshd -> redis, redis -> sshd,
  sshd -> link, link -> ssh, ssh -> client;

so the time each process holds the request (its wake-up, its work, its send) is told
apart from the link's. A "cold" operation is the first of a system's turn (the other
system ran meanwhile, a few milliseconds); a "warm" one follows one of the same system.

Writes ``benchmarks/results/endpoint_hops.json`` and prints the tables.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.endpoint._topology import Topology

from bench_endpoints import (
    PEER_PORT,
    ROOT,
    SSH_PORT,
    Run,
    interleaved,
    log,
    run_sshd_dir,
    ssh_tunnel,
    tether_setup,
)

TUNNEL_PORT = 16379
REDIS_PORT = 6379
TETHER_HOPS = ['client>ea', 'ea>link', 'link>eb', 'eb>link', 'link>ea', 'ea>client']
SSH_HOPS = [
    'client>ssh',
    'ssh>link',
    'link>sshd',
    'sshd>redis',
    'redis>sshd',
    'sshd>link',
    'link>ssh',
    'ssh>client',
]
_LINE = re.compile(
    r'^(\d+\.\d+) (\S+)\s+(In|Out)\s+IP \S+\.(\d+) > \S+\.(\d+): .*?, length (\d+)',
)


def _packets(path: Path) -> list[tuple[float, str, str, int, int]]:
    """``(time, interface, direction, source port, destination port)`` of data packets."""
    text = subprocess.run(
        ['tcpdump', '-r', str(path), '-nn', '-tt', '--time-stamp-precision=nano'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    out = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m and int(m.group(6)) > 0:
            t, ifc, way, sport, dport, _ = m.groups()
            out.append((float(t), ifc, way, int(sport), int(dport)))
    return out


def _events(site_a: Path, site_b: Path, ea_port: int) -> list[tuple[float, str]]:
    """Name each data packet by the hop it ends."""
    loopback_a = {
        ('to', ea_port): 'client>ea',
        ('from', ea_port): 'ea>client',
        ('to', TUNNEL_PORT): 'client>ssh',
        ('from', TUNNEL_PORT): 'ssh>client',
    }
    loopback_b = {('to', REDIS_PORT): 'sshd>redis', ('from', REDIS_PORT): 'redis>sshd'}
    # Leaving a site's host: named by the remote port; arriving: by the source port
    # (site-a) or the local port (site-b).
    out_a = {PEER_PORT: 'ea>link', SSH_PORT: 'ssh>link'}
    in_a = {PEER_PORT: 'link>ea', SSH_PORT: 'link>ssh'}
    in_b = {PEER_PORT: 'link>eb', SSH_PORT: 'link>sshd'}
    out_b = {PEER_PORT: 'eb>link', SSH_PORT: 'sshd>link'}
    events = []
    for site, loopback, way_out, way_in in (
        (site_a, loopback_a, out_a, in_a),
        (site_b, loopback_b, out_b, in_b),
    ):
        remote_out = site is site_a
        for t, ifc, way, sport, dport in _packets(site):
            if ifc == 'lo':
                name = loopback.get(('to', dport)) or loopback.get(('from', sport))
            elif way == 'Out':
                name = way_out.get(dport if remote_out else sport)
            else:
                name = way_in.get(sport if remote_out else dport)
            if name:
                events.append((t, name))
    events.sort()
    return events


def _wait_listening(log_file: Path, timeout: float = 30) -> None:
    """Wait until tcpdump says (in its log) that it captures."""
    deadline = time.monotonic() + timeout
    while 'listening on' not in (log_file.read_text() if log_file.exists() else ''):
        if time.monotonic() > deadline:
            raise RuntimeError(f'tcpdump did not start: see {log_file}')
        time.sleep(0.05)


def operations(events: list[tuple[float, str]], hops: list[str]) -> list[list[float]]:
    """Each complete operation's event times, in ``hops`` order (others are skipped)."""
    ops = []
    names = [e[1] for e in events]
    i = 0
    while i < len(events):
        if names[i] != hops[0]:
            i += 1
            continue
        times = [events[i][0]]
        j = i + 1
        while j < len(events) and len(times) < len(hops) and names[j] != hops[0]:
            if names[j] == hops[len(times)]:
                times.append(events[j][0])
            j += 1
        if len(times) == len(hops):
            ops.append(times)
        i = j
    return ops


def summary(ops: list[list[float]], hops: list[str]) -> dict[str, Any]:
    """Median microseconds per hop and in all, for every operation, warm and cold ones."""
    groups: dict[str, list[list[float]]] = {'all': ops, 'warm': [], 'cold': []}
    previous_end = None
    for times in ops:
        cold = previous_end is None or times[0] - previous_end > 0.003
        groups['cold' if cold else 'warm'].append(times)
        previous_end = times[-1]
    out: dict[str, Any] = {}
    for label, group in groups.items():
        if not group:
            continue
        steps = {
            f'{a}..{b}': statistics.median((g[k + 1] - g[k]) * 1e6 for g in group)
            for k, (a, b) in enumerate(itertools.pairwise(hops))
        }
        out[label] = {
            'operations': len(group),
            'hops_us': steps,
            'total_us': statistics.median((g[-1] - g[0]) * 1e6 for g in group),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument('--rtt', type=float, default=1.0, help='round trip time (ms) site to site')
    ap.add_argument('--reps', type=int, default=60, help='interleaved pairs')
    ap.add_argument('--out', default=str(ROOT / 'benchmarks' / 'results' / 'endpoint_hops.json'))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit('run as root (network namespaces)')
    work = Path(tempfile.mkdtemp(prefix='tether-bench-hops-'))
    started = time.strftime('%Y-%m-%dT%H:%M:%S%z')
    load_before = os.getloadavg()
    try:
        topo = Topology(
            work / 'build', rate='1gbit', delay_ms=args.rtt / 2, forwards=(PEER_PORT, SSH_PORT)
        )
        with topo, run_sshd_dir():
            r = Run(topo, work)
            try:
                t = tether_setup(r)
                ssh_tunnel(r)
                state = json.loads(
                    (Path(t['homes']['a']) / 'endpoints' / 'ea' / 'state.json').read_text()
                )
                pcaps = {site: work / f'{site}.pcap' for site in 'ab'}
                capture = ['tcpdump', '-i', 'any', '-nn', '--immediate-mode', '-U', 'tcp']
                dumps = [
                    r.bg(f'tcpdump-{site}', topo.site[site], [*capture, '-w', str(pcap)])
                    for site, pcap in pcaps.items()
                ]
                for site in pcaps:
                    _wait_listening(r.logs / f'tcpdump-{site}.log')
                log(f'-- {args.reps} interleaved pairs of 1 KB operations, captured')
                mixed = interleaved(r, t, '1KB', args.reps)
                time.sleep(0.5)  # the last packets in flight reach the captures
                for dump in dumps:
                    dump.send_signal(signal.SIGINT)
                    dump.wait(10)
                events = _events(pcaps['a'], pcaps['b'], int(state['port']))
            finally:
                r.stop_all()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        'started': started,
        'load_before': load_before,
        'load_after': os.getloadavg(),
        'command': ' '.join(sys.argv),
        'rtt_ms': args.rtt,
        'tether': summary(operations(events, TETHER_HOPS), TETHER_HOPS),
        'ssh': summary(operations(events, SSH_HOPS), SSH_HOPS),
        'interleaved': mixed,
    }
    Path(args.out).write_text(json.dumps(result, indent=1))
    for system in ('tether', 'ssh'):
        for label, row in result[system].items():
            print(f'\n{system}, {label} operations ({row["operations"]}), median us per hop:')
            for hop, us in row['hops_us'].items():
                print(f'  {hop:24s} {us:8.1f}')
            print(f'  {"first to last packet":24s} {row["total_us"]:8.1f}')
    print(f'\nwrote {args.out}')


if __name__ == '__main__':
    main()

"""A no-op task's lifetime across two sites (the steering seed's figures 3 and 4).

Run as root from the repository root (it builds network namespaces; needs socat,
redis-server, openssh-server and openssh-client from Debian):

    .venv/bin/python benchmarks/bench_campaign_sites.py [--quick] [--sizes 10kB,1MB]

The world of ``tests/steer/_multisite.py``: the function service and the relay in the
public namespace; site A and site B behind cone NATs, each router delaying its uplink
by 10 ms, so site to site the round trip is 20 ms (site to service 10 ms). The Thinker
and its FaaSTaskServer run at site B; the task runs on a faas endpoint at site A (one
worker). The task is the paper's no-op that returns nothing, ``noop(x) -> None``, which
reads its input (``len(x)``: the proxy resolves, as in the paper's time on worker)
(``--echo``: ``echo(x) -> x``, so the same bytes come back from A to B as the result):
its input crosses from B to A by proxy (threshold 1 kB), through one of three data
fabrics, interleaved per size (their order rotating at each repetition):

* ``endpoints``: tether endpoints ep-a and ep-b peered through the relay (hole punched
  between the two NATs), ``EndpointConnector(['ep-b', 'ep-a'])``;
* ``redis+ssh``: Redis on site B's host, reached from site A through ``ssh -L`` to
  sshd behind a port forward of B's NAT (the seed's tunnel), ``RedisConnector``;
* ``shared-fs``: a ``FileConnector`` on a folder both sites see (this host's disk:
  a shared file system with no network cost, the best case of the paper's Lustre).

Components, from the Result's timestamps and timings (seconds):
thinker->server ``input_received - created`` (includes serializing and storing the input),
server->worker ``compute_started - start_task_submission`` (through the service),
on worker ``compute_ended - compute_started`` (includes fetching the input),
result back ``result_received - compute_ended`` (includes storing the result),
serialization (``serialize_inputs + deserialize_inputs + serialize_results +
deserialize_results``; the two serializations include the store puts, also given
alone as ``put input`` and ``put result``), and ``access`` (the Thinker reading the
value: fetching the result). ``total`` = ``result_received - created + access``.

Writes ``benchmarks/results/campaign_sites.json`` (with ``--echo``:
``campaign_sites_echo.json``) and prints the table, with each fabric's total as a ratio
to Redis over SSH in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / 'benchmarks'))

from tests.steer._multisite import MultiSite  # noqa: E402

from _common import machine, print_table, write_json  # noqa: E402

SSH_PORT = 2222
SIZES = {'10kB': 10_000, '1MB': 1_000_000, '10MB': 10_000_000, '100MB': 100_000_000}
REPS = {'10kB': 10, '1MB': 6, '10MB': 4, '100MB': 3}
FABRICS = ('endpoints', 'redis+ssh', 'shared-fs')

THINKER = """
import json
import os
import sys
import time
import uuid

from tether.connectors.endpoint import EndpointConnector
from tether.connectors.file import FileConnector
from tether.connectors.redis import RedisConnector
from tether.steer import PipeQueues
from tether.steer.task_server import FaaSTaskServer
from tether.store import Store


def noop(x):
    len(x)  # reads its input (a proxy resolves), as the paper's workers do
    return None


def echo(x):
    # A new value: an input proxy returned as it is would be the Thinker's own input,
    # which its queues evict once they read the result.
    return bytes(x)


def proxy_seconds(times, op):
    return sum(v['times'].get(op, {}).get('seconds', 0.0) for v in times.values())


def components(r, access):
    ts, t = r.timestamp, r.time
    ser = sum(x or 0.0 for x in (t.serialize_inputs, t.deserialize_inputs,
                                  t.serialize_results, t.deserialize_results))
    return {
        'thinker_to_server': ts.input_received - ts.created,
        'server_to_worker': ts.compute_started - ts.start_task_submission,
        'on_worker': ts.compute_ended - ts.compute_started,
        'result_back': ts.result_received - ts.compute_ended,
        'serialization': ser,
        'put_input': t.serialize_inputs,
        'put_result': t.serialize_results,
        'access': access,
        'total': ts.result_received - ts.created + access,
        'message_bytes': r.message_sizes,
    }


if __name__ == '__main__':
    url, token_file, endpoint, shared, plan, method = sys.argv[1:7]
    plan = json.loads(plan)
    prefix = f'bench-{uuid.uuid4().hex[:8]}'
    stores = {
        'endpoints': Store('fab-endpoints', EndpointConnector(['ep-b', 'ep-a']), register=True),
        'redis+ssh': Store('fab-redis', RedisConnector('127.0.0.1', 6379, prefix=prefix),
                           register=True),
        'shared-fs': Store('fab-file', FileConnector(shared), register=True),
    }
    fabrics = list(stores)
    queues = PipeQueues(topics=fabrics, proxystore_name={f: s.name for f, s in stores.items()},
                        proxystore_threshold={f: 1000 for f in fabrics})
    server = FaaSTaskServer({noop: endpoint, echo: endpoint}, queues, service_url=url,
                            token=open(token_file).read().strip())
    server.start()
    rows = []
    try:
        for f in fabrics:  # warm-up: workers, peering, tunnel, service
            for _ in range(2):
                queues.send_inputs(os.urandom(2000), method='echo', topic=f)
                r = queues.get_result(f, timeout=300)
                assert r.success, r.failure_info
                bytes(r.value)
        for label, size, reps in plan:
            for rep in range(reps):
                order = fabrics[rep % 3:] + fabrics[:rep % 3]
                for f in order:
                    data = os.urandom(size)
                    queues.send_inputs(data, method=method, topic=f, keep_inputs=False)
                    r = queues.get_result(f, timeout=900)
                    if not r.success:
                        rows.append({'fabric': f, 'size': label, 'error': str(r.failure_info)})
                        continue
                    start = time.perf_counter()
                    value = None if r.value is None else bytes(r.value)
                    access = time.perf_counter() - start
                    assert value == (data if method == 'echo' else None), f'{f} {label}'
                    del value, data
                    rows.append({'fabric': f, 'size': label, 'rep': rep,
                                 **components(r, access)})
                print(f'{label} rep {rep} done', file=sys.stderr, flush=True)
    finally:
        queues.send_kill_signal()
        server.join(60)
        stores['redis+ssh'].connector.close()
    print(json.dumps(rows))
"""


def log(msg: str) -> None:
    print(f'[{time.strftime("%H:%M:%S")}] {msg}', file=sys.stderr, flush=True)


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


def wait_port(w: MultiSite, ns: str, host: str, port: int, timeout: float = 30) -> None:
    code = (
        'import socket, sys, time\n'
        f'deadline = time.monotonic() + {timeout}\n'
        'while True:\n'
        '    try:\n'
        f'        socket.create_connection(({host!r}, {port}), 1).close(); break\n'
        '    except OSError:\n'
        '        if time.monotonic() > deadline: sys.exit(1)\n'
        '        time.sleep(0.1)\n'
    )
    subprocess.run(['ip', 'netns', 'exec', ns, sys.executable, '-c', code], check=True,
                   timeout=timeout + 30)  # fmt: skip


def bg(w: MultiSite, name: str, ns: str, cmd: list[str]) -> None:
    w.background(['ip', 'netns', 'exec', ns, *cmd], f'{name}.log')


def redis_over_ssh(w: MultiSite) -> None:
    """Redis on site B's host; site A's 127.0.0.1:6379 reaches it through ``ssh -L`` to
    sshd behind nat-b's port forward (so one connector config serves both sites)."""
    topo, d = w.topo, w.root / 'ssh'
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
    bg(w, 'redis', topo.site['b'], [*redis, '--appendonly', 'no', '--dir', str(w.root)])
    bg(w, 'sshd', topo.site['b'], ['/usr/sbin/sshd', '-D', '-e', '-f', str(d / 'sshd_config')])
    wait_port(w, topo.site['b'], '127.0.0.1', 6379)
    wait_port(w, topo.site['b'], topo.address['b'], SSH_PORT)
    ssh = ['ssh', '-F', '/dev/null', '-i', str(d / 'client'), '-o', 'IdentitiesOnly=yes',
           '-o', f'UserKnownHostsFile={d}/known_hosts', '-o', 'StrictHostKeyChecking=no',
           '-o', 'BatchMode=yes', '-o', 'ExitOnForwardFailure=yes', '-N',
           '-L', '127.0.0.1:6379:127.0.0.1:6379', '-p', str(SSH_PORT),
           f'root@{topo.public["b"]}']  # fmt: skip
    bg(w, 'ssh-tunnel', topo.site['a'], ssh)
    wait_port(w, topo.site['a'], '127.0.0.1', 6379)


def summarize(rows: list[dict[str, Any]], sizes: list[str]) -> dict[str, Any]:
    keys = ('thinker_to_server', 'server_to_worker', 'on_worker', 'result_back',
            'serialization', 'put_input', 'put_result', 'access', 'total')  # fmt: skip
    out: dict[str, Any] = {}
    for size in sizes:
        for fabric in FABRICS:
            got = [r for r in rows if r['size'] == size and r['fabric'] == fabric]
            ok = [r for r in got if 'error' not in r]
            out.setdefault(size, {})[fabric] = {
                'n': len(ok),
                'errors': len(got) - len(ok),
                **{k: statistics.median(r[k] for r in ok) if ok else None for k in keys},
            }
    return out


def table(summary: dict[str, Any]) -> str:
    cols = ['size', 'fabric', 'thinker->server', 'server->worker', 'on worker',
            'result back', 'serialization', 'access', 'total', 'vs redis+ssh']  # fmt: skip
    rows = []
    for size, fabrics in summary.items():
        base = fabrics['redis+ssh']['total']
        for fabric, m in fabrics.items():
            if m['total'] is None:
                rows.append([size, fabric, *(['-'] * 7), f'{m["errors"]} errors'])
                continue
            cells = [f'{m[k] * 1000:.1f}' for k in ('thinker_to_server', 'server_to_worker',
                     'on_worker', 'result_back', 'serialization', 'access', 'total')]  # fmt: skip
            ratio = f'{m["total"] / base:.2f}x' if base else '-'
            rows.append([size, fabric, *cells, ratio])
    return print_table('No-op task lifetime across two sites (median ms)', cols, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', default=','.join(SIZES))
    parser.add_argument('--quick', action='store_true', help='2 repetitions per size')
    parser.add_argument('--delay-ms', type=float, default=10.0, help='per uplink (RTT 2x)')
    parser.add_argument(
        '--echo', action='store_true', help='the task returns its input (default: None)'
    )
    args = parser.parse_args()
    sizes = args.sizes.split(',')
    plan = [[s, SIZES[s], 2 if args.quick else REPS[s]] for s in sizes]
    work = Path(tempfile.mkdtemp(prefix='bench-campaign-'))
    started = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())
    try:
        with (
            run_sshd_dir(),
            MultiSite(work, delay_ms=args.delay_ms, workers=(1, 1), forwards=(SSH_PORT,)) as w,
        ):
            log(f'world up: {w.timings}')
            redis_over_ssh(w)
            shared = w.root / 'shared-fs'
            shared.mkdir()
            log('running the Thinker at site B')
            rows = w.run_python(
                THINKER, w.service_url, str(w.token_file), w.endpoint_ids['sim-a'],
                str(shared), json.dumps(plan), 'echo' if args.echo else 'noop',
                site='b', timeout=7200,
            )  # fmt: skip
            peers = {'a': w.peers('a'), 'b': w.peers('b')}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = summarize(rows, sizes)
    text = table(summary)
    data = {
        'started': started,
        'task': 'echo(x) -> x' if args.echo else 'noop(x) -> None',
        'command': ' '.join(['benchmarks/bench_campaign_sites.py', *sys.argv[1:]]),
        'link': {
            'delay_ms_per_uplink': args.delay_ms,
            'rtt_site_to_site_ms': 2 * args.delay_ms,
            'rate': '1gbit',
        },
        'peers': peers,
        'summary': summary,
        'rows': rows,
        'machine': machine(),
    }
    write_json('campaign_sites_echo' if args.echo else 'campaign_sites', data, text)


if __name__ == '__main__':
    main()

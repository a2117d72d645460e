"""Instructions per operation on the message paths (issue 26), counted by callgrind.

Wall-clock A/B runs on a loaded machine vary more than the 3% they must show; instruction
counts do not. Collection is switched on (``callgrind_control -i on``) only around a
fixed loop. Run each mode against each checkout:

    PYTHONPATH=<checkout>/src valgrind --tool=callgrind --instr-atstart=no \\
        --callgrind-out-file=node.out .venv/bin/python benchmarks/callgrind_messages.py node
    PYTHONPATH=<checkout>/src:<checkout> .venv/bin/python benchmarks/callgrind_messages.py fwd
    PYTHONPATH=<checkout>/src valgrind --tool=callgrind --instr-atstart=no \\
        --callgrind-out-file=tasks.out .venv/bin/python benchmarks/callgrind_messages.py \\
        tasks --code old|new --part service|agent

``node``: a node server in a thread and its client, 1 KB ``put`` + ``get``; read the total
from valgrind's ``Collected`` line. ``fwd``: two endpoints (``fwd-a`` under callgrind) and
forwarded 1 KB ``get`` and ``set``; prints instructions per operation net of idle work.
``tasks``: reading a 1,000-task submission (service) or ``TASKS`` message (agent), five
times; read ``summary:`` in ``tasks.out.1``. ``--code old`` replays the header reads of
the code before the records (it had no decoder to call).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def _ctl(pid: int, *args: str) -> None:
    subprocess.run(['callgrind_control', *args, str(pid)], check=True, capture_output=True)


def node(n: int) -> None:
    from tether._serve import codes
    from tether._wire import SyncConnection
    from tether.node._server import NodeServer

    ready = threading.Event()
    server = NodeServer('cg', secret='s', spill_dir=Path(tempfile.mkdtemp()))

    def serve() -> None:
        async def main() -> None:
            started = asyncio.Event()
            task = asyncio.ensure_future(server.serve(started))
            await started.wait()
            ready.set()
            await task

        asyncio.new_event_loop().run_until_complete(main())

    threading.Thread(target=serve, daemon=True).start()
    ready.wait()
    conn = SyncConnection('127.0.0.1', server.port, secret='s')
    data = os.urandom(1000)
    for _ in range(100):
        conn.request(codes.PUT, {'ids': ['w']}, [data])
        conn.request(codes.GET, {'ids': ['w']})
    _ctl(os.getpid(), '-i', 'on')
    for i in range(n):
        oid = f'{i:032x}'
        conn.request(codes.PUT, {'ids': [oid]}, [data])
        conn.request(codes.GET, {'ids': [oid]})
    _ctl(os.getpid(), '-i', 'off')
    os._exit(0)


def fwd(n: int, out: str) -> None:
    from tests.endpoint.conftest import Relay, Site, write_relay_config

    tmp = Path(tempfile.mkdtemp(prefix='tether-cg-'))
    relay = Relay(write_relay_config(tmp / 'relay', '127.0.0.1', 0)).start()
    home = tmp / 'home'
    home.mkdir()
    (tmp / 'relay.pem').write_text((tmp / 'relay' / 'relay.pem').read_text())
    site = Site(home)
    vg = None
    try:
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            port = int(s.getsockname()[1])
        site.configure('fwd-a', relay.address)
        peering = {'port': port, 'advertise': [f'127.0.0.1:{port}']}
        site.configure('fwd-b', relay.address, peering=peering)
        site.start('fwd-b')
        cmd = ['valgrind', '--tool=callgrind', '--instr-atstart=no']
        cmd += [f'--callgrind-out-file={out}', sys.executable, '-m', 'tether.endpoint']
        with open(out + '.log', 'w') as log:
            vg = subprocess.Popen([*cmd, 'fwd-a', str(home)], env=site.env(), stderr=log)
        state = home / 'endpoints' / 'fwd-a' / 'state.json'
        while not (state.exists() and state.stat().st_size):
            time.sleep(0.5)
        conn_a, conn_b = site.connector('fwd-a', own_channels=False), site.connector('fwd-b')
        data = os.urandom(1000)
        key = conn_b.put(data)
        for _ in range(100):
            conn_a.get(key)
        _ctl(vg.pid, '-i', 'on')
        _ctl(vg.pid, '-z')
        t0 = time.monotonic()
        time.sleep(15)
        _ctl(vg.pid, '-d')
        idle = time.monotonic() - t0
        t0 = time.monotonic()
        for _ in range(n):
            conn_a.get(key)
        for _ in range(n):
            conn_a.set(key, data)
        _ctl(vg.pid, '-d')
        busy = time.monotonic() - t0
        _ctl(vg.pid, '-i', 'off')
        conn_a.close()
        conn_b.close()
    finally:
        if vg is not None:
            vg.send_signal(signal.SIGTERM)
            vg.wait(300)
        site.stop('fwd-b')
        relay.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    rate = _total(out + '.1') / idle
    ops = _total(out + '.2')
    print(f'{(ops - rate * busy) / (2 * n):.0f} instructions per operation net of idle work')


def _total(path: str) -> int:
    with open(path) as f:
        return next(int(line.split()[1]) for line in f if line.startswith('summary:'))


def tasks(code: str, part: str) -> None:
    from tether.faas import _frames
    from tether.faas._submitted import task_message as _task_message

    n = 1000
    entries = [
        {
            'task_id': f't{i}',
            'function_id': 'f1',
            'endpoint_id': 'e1',
            'data_serializer': 'tether',
            'result_store': None,
            'result_threshold': None,
            't': {'client_sent': 1.0},
        }
        for i in range(n)
    ]
    submit: dict[str, Any] = {'task_group_id': 'g1', 'tasks': entries}
    queued = [{**e, 'task_group_id': 'g1'} for e in entries]
    msg = _frames.encode(_frames.TASKS, {'tasks': queued}, [b'x'] * n)
    task_message: Any = _task_message

    def old_service() -> None:
        ts = submit['tasks']
        sorted({str(t.get('function_id')) for t in ts})
        sorted({str(t.get('endpoint_id')) for t in ts})
        [task_message(t, str(t['function_id']), 'g1', 2.0) for t in ts]

    def new_service() -> None:
        sub = _frames.decode_submission(submit, n)
        sorted({t.function_id for t in sub.tasks})
        sorted({t.endpoint_id for t in sub.tasks})
        [task_message(t, 'g1', 2.0) for t in sub.tasks]

    def old_agent(frame: Any) -> None:
        out = []
        for header, payload in zip(frame.header.get('tasks', []), frame.payloads, strict=False):
            task_id = str(header['task_id'])
            header.setdefault('t', {})['endpoint_received'] = 3.0
            fid = str(header['function_id'])
            header.get('result_store')
            v = header.get('timeout')
            ok = isinstance(v, int | float) and not isinstance(v, bool) and v > 0
            timeout = float(v) if ok else None
            ser = str(header.get('data_serializer', 'tether'))
            store, threshold = header.get('result_store'), header.get('result_threshold')
            out.append((task_id, fid, ser, bytes(payload), store, threshold, timeout, header['t']))

    def new_agent(frame: Any) -> None:
        out = []
        for message, payload in _frames.decode_tasks(frame):
            task_id, fid, _, ser, store, threshold, timeout, t = message
            stamps = t
            stamps['endpoint_received'] = 3.0
            out.append((task_id, fid, ser, bytes(payload), store, threshold, timeout, stamps))

    service, agent = (old_service, old_agent) if code == 'old' else (new_service, new_agent)
    frames = [_frames.decode(msg) for _ in range(6)]
    service()
    agent(frames[0])
    _ctl(os.getpid(), '-i', 'on')
    _ctl(os.getpid(), '-z')
    for frame in frames[1:]:
        if part == 'service':
            service()
        else:
            agent(frame)
    _ctl(os.getpid(), '-d')
    os._exit(0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('mode', choices=['node', 'fwd', 'tasks'])
    ap.add_argument('--ops', type=int, default=500)
    ap.add_argument('--out', default='fwd.callgrind')
    ap.add_argument('--code', choices=['old', 'new'], default='new')
    ap.add_argument('--part', choices=['service', 'agent'], default='agent')
    args = ap.parse_args()
    if args.mode == 'node':
        node(args.ops)
    elif args.mode == 'fwd':
        fwd(args.ops, args.out)
    else:
        tasks(args.code, args.part)


if __name__ == '__main__':
    main()

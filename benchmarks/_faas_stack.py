"""Start a tether function service and one endpoint for the benchmarks, as processes.

* ``dev``: ``tether faas dev`` (SQLite and in-process queues), one process;
* ``prod``: ``tether faas serve`` over a PostgreSQL database created for the run (dropped
  afterwards) and the RabbitMQ at 127.0.0.1:5672 (queues under a unique prefix, deleted
  afterwards), plus ``tether faas endpoint start`` in its own process.

The client (the benchmark) is a third process, so that the service, the endpoint and the
client do not share a GIL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

TETHER = [sys.executable, '-c', 'from tether.cli import main; main()']
PG_ADMIN = 'postgresql://postgres@127.0.0.1:5432/postgres'
AMQP = 'amqp://guest:guest@127.0.0.1:5672/'


def _wait_file(path: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError(f'{path} did not appear')
        time.sleep(0.05)


@contextlib.contextmanager
def dev_stack(max_workers: int = 2) -> Iterator[dict[str, Any]]:
    home = tempfile.mkdtemp(prefix='tfbench-')
    env = {**os.environ, 'TETHER_FAAS_HOME': home}
    proc = subprocess.Popen(
        [*TETHER, 'faas', 'dev', '--json', '--max-workers', str(max_workers)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        json.loads(proc.stdout.readline())
        with open(os.path.join(home, 'dev.json')) as f:
            info = json.load(f)
        yield {'url': info['url'], 'token': info['token'], 'endpoint_id': info['endpoint_id']}
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
        if proc.stdout is not None:
            proc.stdout.close()
        shutil.rmtree(home, ignore_errors=True)


async def _admin(sql: str, url: str = PG_ADMIN) -> list[Any]:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return list(await conn.fetch(sql))
    finally:
        await conn.close()


async def _delete_queues(db_url: str, prefix: str) -> None:
    import aio_pika

    eps = await _admin('SELECT endpoint_id FROM faas_endpoints', db_url)
    tgs = await _admin('SELECT task_group_id FROM faas_task_groups', db_url)
    conn = await aio_pika.connect(AMQP)
    async with conn:
        channel = await conn.channel()
        for r in eps:
            await channel.queue_delete(f'{prefix}.tasks.{r[0]}')
        for r in tgs:
            await channel.queue_delete(f'{prefix}.results.{r[0]}')


@contextlib.contextmanager
def prod_stack(max_workers: int = 2) -> Iterator[dict[str, Any]]:
    tag = uuid.uuid4().hex[:8]
    db = f'tether_faas_bench_{tag}'
    db_url = f'postgresql://postgres@127.0.0.1:5432/{db}'
    prefix = f'tfaas-bench-{tag}'
    home = tempfile.mkdtemp(prefix='tfbench-')
    env = {**os.environ, 'TETHER_FAAS_HOME': home}
    asyncio.run(_admin(f'CREATE DATABASE {db}'))
    config = os.path.join(home, 'service.toml')
    with open(config, 'w') as f:
        f.write(
            f'[service]\nport = 0\ndatabase = "{db_url}"\nbroker = "{AMQP}"\n'
            f'queue_prefix = "{prefix}"\nmax_payload_bytes = {120 * 2**20}\n'
            f'max_request_bytes = {512 * 2**20}\n'
        )
    serve = None
    try:
        token = subprocess.run(
            [*TETHER, 'faas', 'add-user', '--config', config, 'bench'],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout.strip()
        log = open(os.path.join(home, 'serve.log'), 'w')  # noqa: SIM115
        serve = subprocess.Popen(
            [*TETHER, 'faas', 'serve', '--config', config, '--json'],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
        )
        assert serve.stdout is not None
        url = json.loads(serve.stdout.readline())['url']
        out = subprocess.run(
            [
                *TETHER,
                'faas',
                'endpoint',
                'configure',
                'bench',
                '--service',
                url,
                '--token',
                token,
                '--max-workers',
                str(max_workers),
                '--json',
            ],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout
        endpoint_id = json.loads(out)['endpoint_id']
        subprocess.run(
            [*TETHER, 'faas', 'endpoint', 'start', 'bench'],
            check=True,
            env=env,
            capture_output=True,
        )
        yield {'url': url, 'token': token, 'endpoint_id': endpoint_id}
    finally:
        subprocess.run(
            [*TETHER, 'faas', 'endpoint', 'stop', 'bench'],
            env=env,
            capture_output=True,
            check=False,
        )
        with contextlib.suppress(Exception):
            asyncio.run(_delete_queues(db_url, prefix))
        if serve is not None:
            serve.send_signal(signal.SIGINT)
            try:
                serve.wait(30)
            except subprocess.TimeoutExpired:
                serve.kill()
            if serve.stdout is not None:
                serve.stdout.close()
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS {db} WITH (FORCE)'))
        shutil.rmtree(home, ignore_errors=True)

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
def service_home(kind: str, user: str, settings: str = '') -> Iterator[dict[str, Any]]:
    """A PostgreSQL database created for the run (dropped afterwards), a faas home with a
    ``service.toml`` (queues under a unique prefix; ``settings``: more ``[service]``
    lines) and a user; yields ``{'db_url', 'prefix', 'home', 'env', 'config', 'token'}``.
    The caller stops its processes and deletes its queues before this ends."""
    tag = uuid.uuid4().hex[:8]
    db = f'tether_faas_{kind}_{tag}'
    db_url = f'postgresql://postgres@127.0.0.1:5432/{db}'
    prefix = f'tfaas-{kind}-{tag}'
    home = tempfile.mkdtemp(prefix=f'tf{kind}-')
    env = {**os.environ, 'TETHER_FAAS_HOME': home}
    asyncio.run(_admin(f'CREATE DATABASE {db}'))
    try:
        config = os.path.join(home, 'service.toml')
        with open(config, 'w') as f:
            f.write(
                f'[service]\nport = 0\ndatabase = "{db_url}"\nbroker = "{AMQP}"\n'
                f'queue_prefix = "{prefix}"\n{settings}'
            )
        token = subprocess.run(
            [*TETHER, 'faas', 'add-user', '--config', config, user],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout.strip()
        yield {
            'db_url': db_url,
            'prefix': prefix,
            'home': home,
            'env': env,
            'config': config,
            'token': token,
        }
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS {db} WITH (FORCE)'))
        shutil.rmtree(home, ignore_errors=True)


def start_serve(run: dict[str, Any], log_name: str) -> tuple[subprocess.Popen[str], str]:
    """``tether faas serve`` on ``run``'s config (from :func:`service_home`), its stderr
    to ``log_name`` in the home; returns the process and its URL."""
    log = open(os.path.join(run['home'], log_name), 'w')  # noqa: SIM115
    proc = subprocess.Popen(
        [*TETHER, 'faas', 'serve', '--config', run['config'], '--json'],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=run['env'],
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())['url']


def stop_serves(procs: list[subprocess.Popen[str]]) -> None:
    """Interrupt every ``tether faas serve`` process, then wait for each (killed at 30 s)."""
    for proc in procs:
        proc.send_signal(signal.SIGINT)
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        if proc.stdout is not None:
            proc.stdout.close()


@contextlib.contextmanager
def prod_stack(max_workers: int = 2, more_settings: str = '') -> Iterator[dict[str, Any]]:
    settings = f'max_payload_bytes = {120 * 2**20}\nmax_request_bytes = {512 * 2**20}\n'
    settings += more_settings
    with service_home('bench', 'bench', settings) as run:
        env, token = run['env'], run['token']
        serve = None
        try:
            serve, url = start_serve(run, 'serve.log')
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
                asyncio.run(_delete_queues(run['db_url'], run['prefix']))
            if serve is not None:
                stop_serves([serve])

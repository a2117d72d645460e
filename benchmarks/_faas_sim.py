"""Simulated endpoints for the function service at scale (benchmarks/bench_faas_scale.py).

A simulated endpoint is a light asyncio client that speaks the real endpoint protocol
(:mod:`tether.faas._frames` over the service's WebSocket, as
:mod:`tether.faas.endpoint._agent` does): it sends ``HELLO``, waits for ``WELCOME``, and
answers each ``TASKS`` message with its ``RESULTS`` (no-op tasks: at once, the results
standing for the hand-offs, as the agent's do when they go together; otherwise an
``ACK`` first, then each result when its simulated worker is done). It
stands in for a manager with ``workers`` workers: a task takes ``kind`` (``noop``: none;
``sleep``: ``duration`` s of waiting; ``stress``: ``duration`` s of CPU in the process)
and at most ``workers`` run at once. Many endpoints share one event loop and one process;
:class:`Fleet` spreads them over a few processes.

:func:`service_stack` starts ``tether faas serve`` replicas over a PostgreSQL database
created for the run and RabbitMQ (queues under a unique prefix), as
``_faas_stack.prod_stack`` does, without any real endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

from _faas_stack import _delete_queues, service_home, start_serve, stop_serves
from tether.faas import _frames
from tether.faas._http import ws_url
from tether.faas._payload import pack_result

__all__ = ['Fleet', 'rss_kb', 'service_stack', 'sim_endpoint']

NONE_RESULT = pack_result(None, 'tether')


def _answers(frame: Any) -> tuple[list[str], list[tuple[dict[str, Any], bytes]]]:
    """The ids of a ``TASKS`` message's tasks and a no-op result of each."""
    ids = []
    results = []
    for task, _ in _frames.decode_tasks(frame):
        ids.append(task.task_id)
        header = {
            'task_id': task.task_id,
            'status': 'success',
            'result_serializer': task.data_serializer,
        }
        results.append((header, NONE_RESULT))
    return ids, results


async def sim_endpoint(  # noqa: PLR0917
    url: str,
    token: str,
    stop: asyncio.Event,
    welcomed: asyncio.Event | None = None,
    kind: str = 'noop',
    duration: float = 0.0,
    workers: int = 8,
) -> int:
    """Serve one simulated endpoint until ``stop``; return the tasks it answered."""
    from websockets.asyncio.client import connect

    done = 0
    slots = asyncio.Semaphore(workers)
    pending: set[asyncio.Task[None]] = set()
    async with connect(
        ws_url(url, '/v1/endpoint/connect'),
        additional_headers={'Authorization': f'Bearer {token}'},
        max_size=None,
        compression=None,
        ping_interval=None,
        open_timeout=120,
    ) as ws:
        hello = {'held': [], 'engine': 'sim', 'min_workers': 0, 'max_workers': workers}
        await ws.send(_frames.encode(_frames.HELLO, {**hello, 'workers': workers}))

        async def run(entries: list[tuple[dict[str, Any], Any]]) -> None:
            nonlocal done
            async with slots:
                start = time.time()
                if kind == 'sleep':
                    await asyncio.sleep(duration)
                elif kind == 'stress':
                    end = time.perf_counter() + duration
                    while time.perf_counter() < end:
                        pass
                now = time.time()
                for header, _ in entries:
                    header['t'] = {'worker_start': start, 'worker_end': now}
                for message in _frames.pack(_frames.RESULTS, 'results', entries):
                    await ws.send(message)
                done += len(entries)

        async def receive() -> None:
            async for message in ws:
                if isinstance(message, str):
                    continue
                frame = _frames.decode(message)
                if frame.type == _frames.WELCOME and welcomed is not None:
                    welcomed.set()
                elif frame.type == _frames.TASKS:
                    ids, results = _answers(frame)
                    if kind == 'noop':  # all at once, one message (no ACK before it)
                        job = asyncio.ensure_future(run(results))
                    else:  # one worker per task
                        await ws.send(_frames.encode(_frames.ACK, {'task_ids': ids}))
                        for entry in results:
                            job = asyncio.ensure_future(run([entry]))
                            pending.add(job)
                            job.add_done_callback(pending.discard)
                        continue
                    pending.add(job)
                    job.add_done_callback(pending.discard)

        receiver = asyncio.ensure_future(receive())
        await stop.wait()
        receiver.cancel()
        for job in list(pending):
            job.cancel()
    return done


def _fleet_main(  # noqa: PLR0917
    urls: list[str],
    tokens: list[str],
    ready: Any,
    stop: Any,
    kind: str,
    duration: float,
    workers: int,
) -> None:
    async def main() -> None:
        halt = asyncio.Event()
        welcomes = [asyncio.Event() for _ in tokens]
        jobs = []
        for i, token in enumerate(tokens):
            url = urls[i % len(urls)]
            coro = sim_endpoint(url, token, halt, welcomes[i], kind, duration, workers)
            jobs.append(asyncio.ensure_future(coro))
            if i % 50 == 49:  # do not open a thousand sockets in one burst
                await asyncio.sleep(0.01)
        await asyncio.gather(*(w.wait() for w in welcomes))
        ready.set()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, stop.wait)
        halt.set()
        await asyncio.gather(*jobs, return_exceptions=True)

    asyncio.run(main())


class Fleet:
    """``len(tokens)`` simulated endpoints in ``processes`` processes; endpoint ``i``
    connects to ``urls[i % len(urls)]``. ``with Fleet(...):`` returns once every endpoint
    is welcomed."""

    def __init__(
        self,
        urls: list[str],
        tokens: list[str],
        processes: int = 2,
        *,
        kind: str = 'noop',
        duration: float = 0.0,
        workers: int = 8,
        timeout: float = 900,
    ) -> None:
        ctx = multiprocessing.get_context('spawn')
        self._stop = ctx.Event()
        self._procs = []
        self._ready = []
        self.timeout = timeout
        processes = max(1, min(processes, len(tokens)))
        for p in range(processes):
            ready = ctx.Event()
            # endpoint i of the whole fleet goes to urls[i % len(urls)]
            mine = list(range(p, len(tokens), processes))
            own_urls = [urls[i % len(urls)] for i in mine]
            args = (own_urls, [tokens[i] for i in mine], ready, self._stop, kind, duration)
            self._procs.append(ctx.Process(target=_fleet_main, args=(*args, workers)))
            self._ready.append(ready)

    @property
    def pids(self) -> list[int]:
        """The fleet's process ids (once entered)."""
        return [p.pid for p in self._procs if p.pid is not None]

    def __enter__(self) -> Fleet:
        for proc in self._procs:
            proc.start()
        for ready, proc in zip(self._ready, self._procs, strict=True):
            if not ready.wait(self.timeout):
                self.__exit__()
                raise RuntimeError(f'simulated endpoints of process {proc.pid} not welcomed')
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for proc in self._procs:
            proc.join(60)
            if proc.is_alive():
                proc.kill()
                proc.join()


def rss_kb(pid: int) -> int:
    """Resident memory of process ``pid`` in KB."""
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return 0


_CPU_CGROUP = '/sys/fs/cgroup/cpu'


@contextlib.contextmanager
def cpu_capped(pid: int, cores: float, name: str) -> Iterator[str]:
    """Hold process ``pid`` (all its threads) to ``cores`` CPUs with a cgroup (v1 ``cpu``
    controller: a CFS quota of ``cores`` periods per period), standing in for a host of
    that size of its own; the cgroup is removed afterwards. Needs root and the v1 cpu
    hierarchy at ``/sys/fs/cgroup/cpu`` (a clear error if not)."""
    path = os.path.join(_CPU_CGROUP, name)
    try:
        os.mkdir(path)
    except OSError as e:
        raise RuntimeError(f'cannot make the cgroup {path} for --replica-cores: {e}') from e
    try:
        with open(os.path.join(path, 'cpu.cfs_period_us')) as f:
            period = int(f.read())
        with open(os.path.join(path, 'cpu.cfs_quota_us'), 'w') as f:
            f.write(str(int(cores * period)))
        with open(os.path.join(path, 'cgroup.procs'), 'w') as f:
            f.write(str(pid))
        yield path
    finally:
        with (
            contextlib.suppress(OSError),
            open(os.path.join(_CPU_CGROUP, 'cgroup.procs'), 'w') as f,
        ):
            f.write(str(pid))  # back to the root group if it still runs
        with contextlib.suppress(OSError):
            os.rmdir(path)


@contextlib.contextmanager
def service_stack(
    replicas: int = 1,
    prefetch: int = 256,
    replica_cores: float | None = None,
    more_settings: str = '',
) -> Iterator[dict[str, Any]]:
    """``replicas`` service processes of one service (PostgreSQL, RabbitMQ); yields
    ``{'urls', 'pids', 'token'}`` (a user's token). With ``replica_cores``, each replica
    is held to that many CPUs (:func:`cpu_capped`), as if each ran on a host of its own;
    ``more_settings``: more lines of the ``[service]`` table."""
    settings = (
        f'endpoint_prefetch = {prefetch}\n'
        # one user owns every simulated endpoint: lift the per-user WebSocket limit
        'max_websockets_per_user = 5000\nmax_connections = 5000\n'
    ) + more_settings
    with service_home('sim', 'sim', settings) as run:
        procs: list[subprocess.Popen[str]] = []
        caps = contextlib.ExitStack()
        try:
            urls = []
            for r in range(replicas):
                proc, url = start_serve(run, f'serve{r}.log')
                procs.append(proc)
                urls.append(url)
                if replica_cores is not None:
                    name = f'tether-bench-{os.getpid()}-{r}'
                    caps.enter_context(cpu_capped(proc.pid, replica_cores, name))
            yield {
                'urls': urls,
                'pids': [p.pid for p in procs],
                'token': run['token'],
                'home': run['home'],
            }
        finally:
            with contextlib.suppress(Exception):
                asyncio.run(_delete_queues(run['db_url'], run['prefix']))
            stop_serves(procs)
            caps.close()

"""The seed's multi-site campaign world, as real processes in network namespaces.

```
 ns pub 203.0.113.10: function service (`tether faas serve`, PostgreSQL and RabbitMQ of
                      this host through a socat bridge), relay (`tether relay`), the
                      Thinker and its FaaSTaskServer (the campaign script)
   nat-a (cone) -- site-a 192.0.2.10:     tether endpoint ep-a, faas endpoint sim-a
                                          (with ``slurm``: its workers in the Slurm jobs
                                          of a private cluster in site-a)
   nat-b (cone) -- site-b 198.51.100.10:  tether endpoint ep-b, faas endpoint ml-b
```

Each router delays its uplink egress by ``delay_ms`` (site to site round trip
``2 * delay_ms``). The sites reach only the public namespace; the tether endpoints peer
through the relay (hole punched between the two cone NATs); nothing is tunnelled by
hand. PostgreSQL and RabbitMQ listen on this host's loopback, which no namespace
reaches: a pair of socat processes per port joins them (TCP on the public namespace's
loopback -> a Unix socket in a private folder -> TCP on the host's loopback), so only the
service's own process uses them.

Site B's faas endpoint runs its workers as processes (the process engine). Site A's does
too, unless ``slurm`` is set: then it is the Parsl engine with a Slurm provider, and its
blocks are jobs of a private single-node Slurm cluster whose daemons live in site-a's
namespace at its address (:class:`tests._slurm_netns.NetnsSlurm`; the machine's own
cluster runs its jobs in the host's namespace, which reaches no site). Every process of
site A gets that cluster's ``SLURM_CONF``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests._slurm_netns import NetnsSlurm
from tests.endpoint._topology import PUBLIC, Topology
from tests.endpoint.conftest import TETHER, Relay, Site, write_relay_config

__all__ = ['AMQP_PORT', 'PG_PORT', 'MultiSite']

PG_PORT = 5432
AMQP_PORT = 5672
SERVICE_PORT = 8470
RELAY_PORT = 8700


class MultiSite:
    """Namespaces, bridges, service, relay, tether endpoints and faas endpoints.

    Args:
        root: A fresh folder for configurations, logs and sockets.
        delay_ms: One-way delay of each router's uplink.
        workers: Workers of the faas endpoints at site A and site B.
        forwards: TCP ports nat-b forwards to site-b (the SSH baseline of the benchmark).
        slurm: Site A's faas endpoint runs its workers in one block (a Slurm job) of a
            private Slurm cluster in site-a's namespace (else: as processes).
    """

    def __init__(
        self,
        root: Path,
        *,
        delay_ms: float = 10.0,
        workers: tuple[int, int] = (2, 1),
        forwards: tuple[int, ...] = (),
        slurm: bool = False,
    ) -> None:
        self.root = root
        self.tag = uuid.uuid4().hex[:8]
        self.topo = Topology(root / 'build', delay_ms=delay_ms, forwards=forwards)
        self.workers = workers
        self.slurm: NetnsSlurm | None = None
        if slurm:
            self.slurm = NetnsSlurm(
                root / 'slurm-a', self.topo.site['a'], self.topo.address['a'], name='site-a'
            )
        self.database = f'tether_multisite_{self.tag}'
        self.queue_prefix = f'tether-multisite-{self.tag}'
        self.service_url = f'http://{PUBLIC}:{SERVICE_PORT}'
        self.sites: dict[str, Site] = {}
        self.relay: Relay | None = None
        self.endpoint_ids: dict[str, str] = {}
        self.token_file = root / 'alice.faas-token'
        self._procs: list[subprocess.Popen[Any]] = []
        self._db_made = False
        self.timings: dict[str, float] = {}

    # Building -------------------------------------------------------------------------

    def up(self) -> MultiSite:
        try:
            self._up()
        except BaseException:
            self.down()
            raise
        return self

    def _up(self) -> None:
        mark = time.monotonic()

        def step(name: str) -> None:
            nonlocal mark
            now = time.monotonic()
            self.timings[name] = round(now - mark, 2)
            mark = now

        self.topo.up()
        step('topology')
        if self.slurm is not None:
            self.slurm.start()
            step('slurm')
        for port in (PG_PORT, AMQP_PORT):
            self._bridge(port)
        self._database('CREATE DATABASE {}')
        self._db_made = True
        self._service()
        step('service')
        self.relay = Relay(
            write_relay_config(self.root / 'relay', PUBLIC, RELAY_PORT), self.topo.pub
        ).start()
        step('relay')
        for s in 'ab':
            home = self.root / f'site-{s}' / 'home'
            home.mkdir(parents=True)
            (home.parent / 'relay.pem').write_text((self.root / 'relay' / 'relay.pem').read_text())
            self.sites[s] = Site(home, self.topo.site[s])
            self.sites[s].configure(f'ep-{s}', self.relay.address)
        with ThreadPoolExecutor(4) as pool:
            started = [pool.submit(self.sites[s].start, f'ep-{s}') for s in 'ab']
            faas = {
                name: pool.submit(self._faas_endpoint, s, name, n)
                for s, name, n in (('a', 'sim-a', self.workers[0]), ('b', 'ml-b', self.workers[1]))
            }
            for f in started:
                f.result()
            self.endpoint_ids = {name: f.result() for name, f in faas.items()}
        step('endpoints')

    def _run(self, ns: str, *cmd: str, timeout: float = 60, env: Any = None) -> str:
        out = subprocess.run(
            ['ip', 'netns', 'exec', ns, *cmd],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env,
        )
        if out.returncode != 0:
            raise RuntimeError(f'{" ".join(cmd)} in {ns} failed: {out.stderr[-3000:]}')
        return out.stdout

    def background(self, cmd: list[str], log: str) -> subprocess.Popen[Any]:
        """Start ``cmd`` (stopped at teardown), its output into ``log`` under the root."""
        with open(self.root / log, 'ab') as f:
            proc = subprocess.Popen(cmd, stdout=f, stderr=f)
        self._procs.append(proc)
        return proc

    def _bridge(self, port: int) -> None:
        sock = self.root / 'bridge' / f'{port}.sock'
        sock.parent.mkdir(mode=0o700, exist_ok=True)
        self.background(
            ['socat', f'UNIX-LISTEN:{sock},fork,mode=600', f'TCP:127.0.0.1:{port}'],
            f'bridge-{port}.log',
        )
        self.background(
            ['ip', 'netns', 'exec', self.topo.pub, 'socat',
             f'TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork', f'UNIX-CONNECT:{sock}'],
            f'bridge-{port}-pub.log',
        )  # fmt: skip

    def _database(self, sql: str) -> None:
        import asyncpg

        async def admin() -> None:
            conn = await asyncpg.connect('postgresql://postgres@127.0.0.1:5432/postgres')
            try:
                await conn.execute(sql.format(self.database))
            finally:
                await conn.close()

        asyncio.run(admin())

    def _service(self) -> None:
        folder = self.root / 'service'
        folder.mkdir()
        config = folder / 'service.toml'
        config.write_text(
            f'[service]\nhost = "{PUBLIC}"\nport = {SERVICE_PORT}\n'
            f'database = "postgresql://postgres@127.0.0.1:{PG_PORT}/{self.database}"\n'
            f'broker = "amqp://guest:guest@127.0.0.1:{AMQP_PORT}/"\n'
            f'queue_prefix = "{self.queue_prefix}"\n'
        )
        self.service_config = config
        cmd = ['ip', 'netns', 'exec', self.topo.pub, TETHER, 'faas', 'serve', '--config',
               str(config), '--json']  # fmt: skip
        with open(folder / 'service.log', 'ab') as log:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
        self._procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        proc.stdout.close()
        if not line:
            raise RuntimeError(f'tether faas serve failed: {(folder / "service.log").read_text()}')
        token = self._run(self.topo.pub, TETHER, 'faas', 'add-user', 'alice', '--config',
                          str(config)).strip().splitlines()[-1]  # fmt: skip
        self.token_file.write_text(token)
        self.token_file.chmod(0o600)
        self.token = token

    def env(self, site: str | None) -> dict[str, str]:
        """The environment of a process at ``site`` (``None``: the public namespace)."""
        place = self.root / (f'site-{site}' if site else 'pub')
        (place / 'faas').mkdir(parents=True, exist_ok=True, mode=0o700)
        env = {
            **os.environ,
            'TETHER_HOME': str(place / 'home'),
            'TETHER_FAAS_HOME': str(place / 'faas'),
            'HOME': str(place),
        }
        env.pop('SLURM_CONF', None)
        if site == 'a' and self.slurm is not None:
            env.update(self.slurm.env())
        return env

    def _slurm_options(self, site: str) -> list[str]:
        """``tether faas endpoint configure`` options of a faas endpoint on the site's
        Slurm cluster, as docs/steer.md gives them: one block of one node, started with
        the endpoint, its workers reaching the endpoint at the site's address."""
        if site != 'a' or self.slurm is None:
            return []
        home = self.env(site)['TETHER_HOME']
        return [
            '--provider', 'slurm', '--partition', 'debug', '--walltime', '00:10:00',
            '--nodes-per-block', '1', '--init-blocks', '1', '--min-blocks', '1',
            '--max-blocks', '1',
            '--provider-option', 'exclusive=false',
            '--provider-option', f'address={self.topo.address[site]}',
            '--worker-init', f'export TETHER_HOME={home}',
        ]  # fmt: skip

    def _faas_endpoint(self, site: str, name: str, workers: int) -> str:
        ns, env = self.topo.site[site], self.env(site)
        configure = [TETHER, 'faas', 'endpoint', 'configure', name, '--service',
                     self.service_url, '--token-file', str(self.token_file),
                     '--max-workers', str(workers), '--json']  # fmt: skip
        # On Slurm the block is kept instead (--min-blocks); else the workers.
        configure += self._slurm_options(site) or ['--min-workers', str(workers)]
        made = json.loads(self._run(ns, *configure, env=env))
        with open(self.root / f'faas-{name}.log', 'ab') as log:
            agent = subprocess.Popen(
                ['ip', 'netns', 'exec', ns, TETHER, 'faas', 'endpoint', 'start', name,
                 '--foreground'], stdout=log, stderr=log, env=env,
            )  # fmt: skip
        self._procs.append(agent)
        wait = f"""
            import time
            from tether.faas import Client
            client = Client({self.service_url!r}, {self.token!r})
            deadline = time.monotonic() + 90
            while not client.get_endpoint_status({made['endpoint_id']!r})['online']:
                assert time.monotonic() < deadline, 'endpoint {name} did not come online'
                time.sleep(0.1)
            print('{{}}')
        """
        self.run_python(wait, site=site, timeout=120)
        return str(made['endpoint_id'])

    # Using ----------------------------------------------------------------------------

    def run_python(self, code: str, *args: str, site: str | None = None,
                   timeout: float = 300) -> Any:  # fmt: skip
        """Run ``code`` as ``__main__`` at ``site`` (``None``: the public namespace), and
        return the JSON of its last output line."""
        script = self.root / f'script-{uuid.uuid4().hex[:6]}.py'
        script.write_text(textwrap.dedent(code))
        ns = self.topo.site[site] if site else self.topo.pub
        log = script.with_suffix('.log')
        with open(log, 'w') as err:
            out = subprocess.run(
                ['ip', 'netns', 'exec', ns, sys.executable, str(script), *args],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                timeout=timeout,
                check=False,
                env={**self.env(site), 'PYTHONPATH': str(Path(__file__).resolve().parents[2])},
                cwd=self.root,
            )
        if out.returncode != 0:
            raise RuntimeError(
                f'{script.name} failed ({out.returncode}): {log.read_text()[-5000:]}'
            )
        return json.loads(out.stdout.strip().splitlines()[-1])

    def peers(self, site: str) -> dict[str, str]:
        """The peers of ``site``'s tether endpoint and their paths."""
        return {p['name']: p['path'] for p in self.sites[site].status(f'ep-{site}')['peers']}

    # Tearing down ---------------------------------------------------------------------

    def down(self) -> None:
        for site in self.sites.values():
            site.close()
        if self.relay is not None:
            self.relay.stop()
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(15)
        self._procs.clear()
        try:
            if self.slurm is not None:
                self.slurm.stop()  # after the faas endpoint (it cancels its blocks)
        finally:
            self.topo.down()
            if self._db_made:
                self._cleanup_service_state()

    def _cleanup_service_state(self) -> None:
        """Delete the run's RabbitMQ queues and its database (through a service here)."""
        from tests.faas.conftest import AMQP, delete_queues
        from tether.faas import ServiceConfig
        from tether.faas._server import ServiceThread

        config = ServiceConfig(
            port=0,
            database=f'postgresql://postgres@127.0.0.1:5432/{self.database}',
            broker=AMQP,
            queue_prefix=self.queue_prefix,
        )
        with contextlib.suppress(Exception):
            st = ServiceThread(config).start()
            try:
                delete_queues(st)
            finally:
                st.stop()
        with contextlib.suppress(Exception):
            self._database('DROP DATABASE IF EXISTS {} WITH (FORCE)')
        self._db_made = False

    def __enter__(self) -> MultiSite:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()


# The campaign: run as __main__ in the public namespace, so the FaaSTaskServer pickles its
# methods by value. argv: service URL, token file, simulate endpoint, ml endpoint, rounds,
# simulations per round, bytes per simulation. Prints one JSON line.
CAMPAIGN = '''
import hashlib
import json
import random
import sys
import time

from tether.connectors.endpoint import EndpointConnector
from tether.steer import BaseThinker, PipeQueues, agent
from tether.steer.task_server import FaaSTaskServer
from tether.store import Store


def data_of(seed, n, model_sha):
    return random.Random(f'{seed}/{model_sha}').randbytes(n)


def model_of(shas, n):
    return hashlib.sha256(''.join(shas).encode()).digest() * (n // 32)


def simulate(seed, n, model=None):
    """At site A: bytes of a simulation (over the threshold: kept at ep-a, by proxy)."""
    import hashlib
    model_sha = hashlib.sha256(bytes(model)).hexdigest() if model is not None else None
    return data_of(seed, n, model_sha)


def train(datas, n):
    """At site B: reads the simulations from ep-a (a peer through both NATs); the model
    stays at ep-b and travels as a proxy its users resolve, maybe several times."""
    import hashlib
    from tether.proxy import get_factory
    shas = [hashlib.sha256(bytes(d)).hexdigest() for d in datas]
    store = get_factory(datas[0]).get_store()
    return {'shas': shas, 'model': store.proxy(model_of(shas, n))}


def infer(model, count):
    import hashlib
    return [hashlib.sha256(bytes(model)).hexdigest()] * count


class Campaign(BaseThinker):
    def __init__(self, queues, rec, rounds, per_round, n):
        super().__init__(queues, rec)
        self.rounds, self.per_round, self.n = rounds, per_round, n
        self.report = {'rounds': [], 'sizes': []}

    def run_task(self, pool, method, *args):
        self.rec.acquire(pool, 1)
        self.queues.send_inputs(*args, method=method, topic='tasks', task_info={'pool': pool})

    def collect(self, count):
        got = []
        for _ in range(count):
            r = self.queues.get_result('tasks', timeout=120)
            self.rec.release(r.task_info['pool'], 1)
            if not r.success:
                raise RuntimeError(f'{r.method} failed: {r.failure_info}')
            self.report['sizes'].append([r.method, r.message_sizes])
            got.append(r)
        return got

    @agent(startup=True)
    def steer(self):
        model, model_sha = None, None
        for rnd in range(self.rounds):
            seeds = [rnd * 100 + i for i in range(self.per_round)]
            for s in seeds:
                self.run_task('simulate', 'simulate', s, self.n, model)
            sims = sorted(self.collect(len(seeds)), key=lambda r: r.args[0])
            self.run_task('train', 'train', [r.value for r in sims], self.n)
            (trained,) = self.collect(1)
            expect = [hashlib.sha256(data_of(s, self.n, model_sha)).hexdigest() for s in seeds]
            model = trained.value['model']
            # Site B's slots move from training to inference and back (one kind).
            self.rec.reallocate('train', 'infer', 'all')
            self.run_task('infer', 'infer', model, 2)
            (inferred,) = self.collect(1)
            self.rec.reallocate('infer', 'train', 'all')
            model_sha = hashlib.sha256(model_of(expect, self.n)).hexdigest()
            self.report['rounds'].append({
                'simulations_seen_at_b': trained.value['shas'] == expect,
                'model_seen_at_b': inferred.value == [model_sha] * 2,
            })
        # The last model is read at site A too (B -> A through both NATs).
        self.run_task('simulate', 'simulate', 0, 1000, model)
        (last,) = self.collect(1)
        self.report['model_seen_at_a'] = last.value == data_of(0, 1000, model_sha)
        self.done.set()


if __name__ == '__main__':
    import logging
    logging.basicConfig(level=logging.INFO, format='%(asctime)s %(name)s %(message)s')
    url, token_file, sim_ep, ml_ep = sys.argv[1:5]
    rounds, per_round, n = (int(x) for x in sys.argv[5:8])
    token = open(token_file).read().strip()
    store = Store('campaign', EndpointConnector(['ep-a', 'ep-b']), register=True)
    queues = PipeQueues(topics=['tasks'], proxystore_name='campaign',
                        proxystore_threshold=100_000)
    server = FaaSTaskServer({simulate: sim_ep, train: ml_ep, infer: ml_ep}, queues,
                            service_url=url, token=token)
    rec = server.resource_counter({'simulate': simulate, 'train': train, 'infer': infer})
    rec.reallocate(None, 'simulate', 'all')
    rec.reallocate(None, 'train', 'all')
    report = {'kinds': rec.kinds}
    server.start()
    try:
        thinker = Campaign(queues, rec, rounds, per_round, n)
        start = time.perf_counter()
        thinker.run()
        report.update(thinker.report, seconds=time.perf_counter() - start)
    finally:
        queues.send_kill_signal()
        server.join(60)
    print(json.dumps(report))
'''

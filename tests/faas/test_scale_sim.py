"""The scale benchmark's simulated endpoints (benchmarks/_faas_sim.py) speak the real
endpoint protocol: 20 of them, in one process, against the production service, answer
every task of a few hundred, and each task's result comes back to its future."""

from __future__ import annotations

import sys

from tests.faas.conftest import ROOT, new_endpoint, new_user
from tether.faas import Client, Executor
from tether.faas._server import ServiceThread

sys.path.insert(0, str(ROOT / 'benchmarks'))

from _faas_sim import Fleet


def noop() -> None:
    return None


def test_twenty_simulated_endpoints_answer_every_task(prod_service: ServiceThread) -> None:
    user, token = new_user(prod_service)
    endpoints = [new_endpoint(prod_service, user, f'sim{i}') for i in range(20)]
    with (
        Fleet([prod_service.url], [t for _, t in endpoints], processes=1),
        Client(prod_service.url, token) as client,
        Executor(client=client) as ex,
    ):
        fid = client.register_function(noop)
        futures = []
        for i in range(300):
            ex.endpoint_id = endpoints[i % len(endpoints)][0]
            futures.append(ex.submit_to_registered_function(fid))
        assert [f.result(timeout=120) for f in futures] == [None] * 300
        # Each task ran on the endpoint it was sent to (the simulator's own timings).
        assert all('worker_end' in f.timings for f in futures)

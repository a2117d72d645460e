"""A task server on tether's function service (:mod:`tether.faas`)."""

from __future__ import annotations

import functools
import logging
import pickle
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tether.exceptions import ConfigError
from tether.steer.models import Result
from tether.steer.task_server._worker import run_task
from tether.steer.task_server.base import BaseTaskServer, method_name
from tether.steer.thinker import KindResourceCounter

__all__ = ['FaaSTaskServer', 'GlobusComputeTaskServer', 'endpoint_slots', 'run_method']

logger = logging.getLogger(__name__)


class FaaSTaskServer(BaseTaskServer):
    """Run tasks on endpoints of a tether function service.

    Every method runs through one registered function (:func:`run_method`) with the
    method as an argument, pickled once with cloudpickle: by reference if it can be
    imported (the endpoint's workers then import its module), by value if it is defined
    in the campaign's own script (``__main__``, which the workers cannot import), as
    the Local and Parsl task servers run them too. Inputs and values keep their
    proxies, so values over a topic's threshold never pass through the service, whose
    payload limit then does not apply.

    Args:
        methods: A mapping of method to endpoint id, or methods (run on ``endpoint_id``).
        queues: The queues shared with the Thinker.
        endpoint_id: The endpoint of methods given without one (default: the endpoint
            of the running ``tether faas dev``).
        timeout: Idle seconds before stopping (``None``: wait for the kill signal).
        service_url: The service (default: as :class:`tether.faas.Client` finds it).
        token: The user's token (kept in memory; the server is forked, not sent it).
        kill_timeout: Seconds the tasks get to finish after the kill signal; those still
            running then are cancelled on their endpoint (see :class:`BaseTaskServer`).
    """

    def __init__(
        self,
        methods: Mapping[Callable[..., Any], str | None] | Iterable[Callable[..., Any]],
        queues: Any,
        endpoint_id: str | None = None,
        *,
        timeout: float | None = None,
        service_url: str | None = None,
        token: str | None = None,
        kill_timeout: float | None = 10.0,
        metrics: Any = None,
    ) -> None:
        pairs = (
            list(methods.items())
            if isinstance(methods, Mapping)
            else [(m, endpoint_id) for m in methods]
        )
        super().__init__(
            queues, [m for m, _ in pairs], timeout, kill_timeout=kill_timeout, metrics=metrics
        )
        self.endpoints = {method_name(m): e for m, e in pairs}
        self.endpoint_id = endpoint_id
        self._service_url = service_url
        self._token = token
        self._executors: dict[str | None, Any] = {}
        self._pickled: dict[str, bytes] = {}

    def resource_counter(
        self,
        task_types: Mapping[str, Callable[..., Any] | str] | None = None,
        slots: Mapping[str, int] | None = None,
    ) -> KindResourceCounter:
        """A resource counter for the Thinker with one worker kind per endpoint.

        Each endpoint's slots are what it advertises to the service (its
        ``max_workers``, see :func:`endpoint_slots`) unless ``slots`` gives them; a
        pool draws only on the slots of the endpoint its method runs on, so a Thinker
        can never hand a simulation a slot of the training site. The kinds are named
        by endpoint id; all slots start unallocated (``rec.reallocate(None, pool, n)``).

        Args:
            task_types: Pool name to the method (or method name) whose endpoint it
                uses (default: one pool per method, named after it).
            slots: Slots of an endpoint id, overriding what it advertises (needed for
                an endpoint that has not connected yet, and where ``max_workers``
                counts workers per node or manager: ``provider`` or ``managers``).
        """
        pools = task_types if task_types is not None else {n: n for n in self.endpoints}
        endpoint_of: dict[str, str] = {}
        with self._client() as client:  # closed after: its HTTP pool is not needed again
            for pool, method in pools.items():
                name = method if isinstance(method, str) else method_name(method)
                if name not in self.endpoints:
                    raise ConfigError(
                        f'pool {pool!r}: method {name!r} is not one of this task server '
                        f'({sorted(self.endpoints)})'
                    )
                endpoint_of[pool] = self._endpoint_id(self.endpoints[name], client)
            wanted = sorted(set(endpoint_of.values()) - set(slots or {}))
            kinds = {**endpoint_slots(wanted, client=client), **(slots or {})}
        return KindResourceCounter(kinds, endpoint_of)

    def _client(self) -> Any:
        from tether.faas import Client

        return Client(self._service_url, self._token)

    @staticmethod
    def _endpoint_id(endpoint: str | None, client: Any) -> str:
        eid = endpoint or client.dev_endpoint_id
        if not eid:
            raise ConfigError('FaaSTaskServer needs an endpoint id (or `tether faas dev`)')
        return str(eid)

    def start_executor(self) -> None:
        from tether.faas import Executor

        client = self._client()
        for endpoint in set(self.endpoints.values()):
            eid = self._endpoint_id(endpoint, client)
            self._executors[endpoint] = Executor(eid, client=client)
            logger.info('methods on endpoint %s', eid)

    def stop_executor(self) -> None:
        for executor in self._executors.values():
            # After kill_timeout, the tasks still running are cancelled, not waited for.
            executor.shutdown(wait=not self.stop_now, cancel_futures=self.stop_now)
        self._executors.clear()

    def submit_task(self, method: Any, result: Result, done: Callable[[Result], None]) -> None:
        name = method_name(method)
        executor = self._executors[self.endpoints[name]]
        pickled = self._pickled.get(name)
        if pickled is None:  # once per method, in the task server's process
            try:
                pickled = self._pickled[name] = _pickle_method(method)
            except Exception as e:
                result.set_failure(f'method {name!r} cannot be pickled for the endpoint: {e!r}')
                done(result)
                return
        try:
            future = executor.submit(run_method, pickled, result)
        except Exception as e:
            result.set_failure(f'{type(e).__name__}: the function service refused the task: {e}')
            done(result)
            return

        def callback(f: Any) -> None:
            try:
                finished = f.result()
            except Exception as e:
                result.set_failure(
                    f'{type(e).__name__}: the task did not finish on the service: {e}'[:10000]
                )
                finished = result
            done(finished)

        future.add_done_callback(callback)


GlobusComputeTaskServer = FaaSTaskServer


def endpoint_slots(
    endpoint_ids: Iterable[str],
    *,
    client: Any = None,
    service_url: str | None = None,
    token: str | None = None,
) -> dict[str, int]:
    """The slots of each endpoint as it advertised them to the function service: the
    ``max_workers`` it said it runs when it last connected.

    Raises:
        ConfigError: An endpoint never connected (so advertised nothing): start it, or
            give its slots yourself.
    """
    if client is None:
        from tether.faas import Client

        with Client(service_url, token) as made:  # closed after (a given client is not)
            return endpoint_slots(endpoint_ids, client=made)
    found: dict[str, int] = {}
    for eid in endpoint_ids:
        info = client.get_endpoint_metadata(eid)
        workers = info.get('max_workers')
        if not isinstance(workers, int) or workers < 1:
            raise ConfigError(
                f'endpoint {eid} ({info.get("name")}) has not told the service how many '
                'workers it runs (it never connected): start it, or give its slots'
            )
        found[eid] = workers
    return found


def _pickle_method(method: Any) -> bytes:
    """A method as the endpoint's workers can load it: cloudpickle pickles what is
    defined in ``__main__`` (functions, classes of callable objects) by value."""
    import cloudpickle

    return bytes(cloudpickle.dumps(method, protocol=5))


@functools.lru_cache(maxsize=64)
def _load_method(pickled: bytes) -> Callable[..., Any]:
    # Once per method and worker process, not once per task.
    method: Callable[..., Any] = pickle.loads(pickled)
    return method


def run_method(pickled: bytes, result: Result) -> Result:
    """What an endpoint runs for a :class:`FaaSTaskServer`: the pickled method on
    ``result`` (see :func:`~tether.steer.task_server._worker.run_task`)."""
    try:
        method = _load_method(pickled)
    except Exception as e:
        result.set_failure(
            f'the endpoint could not load method {result.method!r}: {type(e).__name__}: {e} '
            '(a method must be importable on the endpoint, or defined in the campaign '
            'script, with what it uses installed there)'
        )
        return result
    return run_task(method, result)

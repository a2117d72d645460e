"""The contracts of tether's seams, gathered in one place.

Each contract is defined next to its subsystem (in a public module there) and named here
too, so that whoever adds an implementation finds every seam, what it must provide, and
the conformance suite in :mod:`tether.testing` that checks it.

Agents (:mod:`tether.agents`):

* :class:`AgentExchange` (``tether.agents.exchange.Exchange``): hosts mailboxes; implement
  ``key()`` and ``make_transport()``. Suite: ``tether.testing.agents.ExchangeConformance``.
* :class:`AgentTransport` (``tether.agents.exchange.Transport``) and
  :class:`AgentListener` (``tether.agents.exchange.Listener``): what an exchange's
  transport implements in each process.
* :class:`AgentLauncher` (``tether.agents.launcher.Launcher``): runs agents; implement
  ``run_once()`` (and ``kill()``). Suite: ``tether.testing.agents.LauncherConformance``.

Benchmarks (:mod:`tether.bench`):

* :class:`BenchExecutor` (``tether.bench.executor.Executor``), built by a
  :class:`BenchExecutorConfig` (``tether.bench.executor.ExecutorConfig``): runs the bench
  engine's tasks (``submit``/``shutdown``). Suite: ``tether.testing.bench.ExecutorConformance``.
* :class:`BenchTransformer` (``tether.bench.transformer.Transformer``), built by a
  :class:`BenchTransformerConfig` (``tether.bench.transformer.TransformerConfig``): passes
  task data by identifier. Suite: ``tether.testing.bench.TransformerConformance``.

Data (:mod:`tether.connectors`, :mod:`tether.stream`):

* :class:`Connector` (``tether.connectors.protocols.Connector``): bytes in, key out;
  optional capabilities in the same module (:class:`DeferrableConnector` for futures).
* :class:`ConnectorBase` (``tether.connectors.base.ConnectorBase``): the base class that
  supplies the batch, multi-buffer and read defaults a Store uses (a connector that does
  not derive from it is adapted once). Suite: ``tether.testing.connectors``
  (``ConnectorConformance``, ``DeferrableConformance``).
* :class:`StreamPublisher`, :class:`StreamSubscriber` and :class:`TopicSubscriber`
  (``tether.stream.protocols``): a broker shim; its subscriber says which topics it
  reads. Suite: ``tether.testing.stream.ShimConformance``.

Function service (:mod:`tether.faas`):

* :class:`FaasEngine` (``tether.faas.endpoint.engine.Engine``): runs a compute endpoint's
  tasks on workers, reporting through its declared ``on_handoff``/``on_result``
  callbacks; chosen by name from ``register_engine()`` or the ``tether.faas_engines``
  entry points. Suite: ``tether.testing.faas.EngineConformance``.

Steering (:mod:`tether.steer`):

* :class:`SteerTaskServer` (``tether.steer.task_server.base.BaseTaskServer``): runs the
  Thinker's requests; implement ``start_executor()``, ``submit_task()`` and
  ``stop_executor()`` (and ``kill_workers()``). Suite:
  ``tether.testing.steer.TaskServerConformance``.
"""

from __future__ import annotations

from tether.agents.exchange import Exchange as AgentExchange
from tether.agents.exchange import Listener as AgentListener
from tether.agents.exchange import Transport as AgentTransport
from tether.agents.launcher import Launcher as AgentLauncher
from tether.bench.executor import Executor as BenchExecutor
from tether.bench.executor import ExecutorConfig as BenchExecutorConfig
from tether.bench.transformer import Transformer as BenchTransformer
from tether.bench.transformer import TransformerConfig as BenchTransformerConfig
from tether.connectors.base import ConnectorBase
from tether.connectors.protocols import Connector, DeferrableConnector
from tether.faas.endpoint.engine import Engine as FaasEngine
from tether.steer.task_server.base import BaseTaskServer as SteerTaskServer
from tether.stream.protocols import Publisher as StreamPublisher
from tether.stream.protocols import Subscriber as StreamSubscriber
from tether.stream.protocols import TopicSubscriber

__all__ = [
    'AgentExchange',
    'AgentLauncher',
    'AgentListener',
    'AgentTransport',
    'BenchExecutor',
    'BenchExecutorConfig',
    'BenchTransformer',
    'BenchTransformerConfig',
    'Connector',
    'ConnectorBase',
    'DeferrableConnector',
    'FaasEngine',
    'SteerTaskServer',
    'StreamPublisher',
    'StreamSubscriber',
    'TopicSubscriber',
]

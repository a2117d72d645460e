"""Configuration of the service and of endpoints, and where their files live.

Everything a user writes is TOML, read into pydantic models. Secrets (user and endpoint
tokens) are never part of a model that is written or sent: they live in their own files,
created with mode 0600 in directories of mode 0700.
"""

from __future__ import annotations

import json
import os
import pathlib
import tomllib
from typing import Any, Literal

import pydantic

from tether._serve.metrics import MetricsOptions
from tether._serve.state import pid_alive
from tether.exceptions import ConfigError
from tether.faas.endpoint._environments import EnvironmentConfig, check_names
from tether.faas.endpoint.providers import ProviderConfig

__all__ = [
    'ComputeEndpointConfig',
    'EndpointConfig',
    'ServiceConfig',
    'dev_file',
    'endpoint_dir',
    'faas_home',
    'pid_alive',
    'read_dev_file',
    'read_toml',
    'validation_message',
    'write_private',
]


class ServiceConfig(pydantic.BaseModel):
    """The ``[service]`` table of ``service.toml`` (``tether faas serve --config``).

    Attributes:
        host: Address to bind (``127.0.0.1`` by default; ``0.0.0.0`` behind a proxy).
        port: TCP port (0: a free port, printed when ready).
        database: ``postgresql://user@host:port/db`` or ``sqlite:///path`` (``sqlite://``
            alone: in memory).
        broker: ``amqp://user:password@host:port/vhost`` or ``memory://`` (in-process
            queues, for one service process).
        queue_prefix: Prefix of every queue the service declares (at most 100 letters,
            digits and ``-_.:``: with an id of at most 64, every queue name fits AMQP's
            255 bytes).
        max_payload_bytes: Largest task argument or result payload accepted (10 MiB, the
            funcX limit); larger ones are refused with advice to pass a proxy.
        max_request_bytes: Largest HTTP request body (a whole batch).
        max_task_attempts: How often a task lost with its endpoint is queued again.
        endpoint_prefetch: Tasks sent to an endpoint and not yet in a worker's hands, at
            most (a larger batch waits in the service); also how many broker messages
            (each one submission's tasks for the endpoint) the service takes at once.
        result_queue_expiry_s: A task group's result queue is deleted after this long
            unused.
        tls_certfile: PEM certificate: serve HTTPS and WSS (recommended across sites).
        tls_keyfile: PEM key of the certificate.
        max_requests_per_user: HTTP requests of one user in progress at once, at most;
            more are refused with 429 (``Retry-After``), which the SDK waits out.
        max_websockets_per_user: WebSockets of one user open at once (result streams
            of Executors and the user's endpoints' connections), at most; more are
            closed with 4429.
        broker_channel_budget: RabbitMQ channels the service's consumers (one per open
            WebSocket) may hold at once; kept below the ``channel_max`` RabbitMQ grants
            the connection (2047 by default), so that no one's excess closes the
            connection every consumer shares. Beyond it, WebSockets are closed with 4503.
        max_connections: Open connections (HTTP and WebSocket) at most; one more is
            closed as soon as it is accepted. Keep it below the process's open-file limit.
        http_keep_alive_timeout_s: A connection with no request under way (new, or
            between requests) is closed after this long.
        http_header_timeout_s: A request's head (request line and headers) must be
            complete this long after its first byte (slow-header clients are dropped).
        http_idle_timeout_s: A request body that pauses this long is dropped.
        metrics: The ``[service.metrics]`` table: where Prometheus metrics are served
            (default: nowhere; see ``docs/observability.md``).
        gc_young_threshold: In a ``tether faas serve`` process, the allocations between
            two collections of Python's youngest garbage-collector generation (Python's
            default is 700; 0 leaves the interpreter's setting alone). With tens of
            thousands of tasks in flight, every young collection walks the survivors
            again; at 20,000 the service spends about a third less CPU per task
            (``docs/faas.md``, "Sizing: endpoints per replica").
    """

    model_config = pydantic.ConfigDict(extra='forbid')

    host: str = '127.0.0.1'
    port: int = pydantic.Field(default=8470, ge=0, le=65535)
    database: str = 'sqlite://'
    broker: str = 'memory://'
    queue_prefix: str = pydantic.Field(
        default='tfaas', min_length=1, max_length=100, pattern=r'^[A-Za-z0-9._:-]+$'
    )
    max_payload_bytes: int = pydantic.Field(default=10 * 2**20, gt=0)
    max_request_bytes: int = pydantic.Field(default=256 * 2**20, gt=0)
    max_task_attempts: int = pydantic.Field(default=3, ge=1)
    endpoint_prefetch: int = pydantic.Field(default=256, ge=1)
    result_queue_expiry_s: float = pydantic.Field(default=7 * 86400, gt=0)
    tls_certfile: str | None = None
    tls_keyfile: str | None = None
    max_connections: int = pydantic.Field(default=2048, ge=1)
    max_requests_per_user: int = pydantic.Field(default=64, ge=1)
    max_websockets_per_user: int = pydantic.Field(default=128, ge=1)
    broker_channel_budget: int = pydantic.Field(default=2000, ge=1)
    http_keep_alive_timeout_s: float = pydantic.Field(default=5.0, gt=0)
    http_header_timeout_s: float = pydantic.Field(default=10.0, gt=0)
    http_idle_timeout_s: float = pydantic.Field(default=30.0, gt=0)
    metrics: MetricsOptions = pydantic.Field(default_factory=MetricsOptions)
    gc_young_threshold: int = pydantic.Field(default=20_000, ge=0)

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> ServiceConfig:
        """Read the ``[service]`` table of a TOML file."""
        data = read_toml(path)
        try:
            return cls.model_validate(data.get('service', {}))
        except pydantic.ValidationError as e:
            raise ConfigError(f'invalid service configuration in {path}: {e}') from e


class ComputeEndpointConfig(pydantic.BaseModel):
    """A compute endpoint's ``config.toml`` (written by ``tether faas endpoint configure``).

    A *compute endpoint* is where the function service runs tasks; not to be confused
    with a data site (``tether.endpoint.SiteConfig``) or the connector to one. Also
    importable under its former name, ``tether.faas.EndpointConfig``.

    Attributes:
        name: Local name of the endpoint.
        endpoint_id: The id the service gave it.
        service_url: Base URL of the service (``http://`` or ``https://``).
        engine: ``'process'`` (a pool of worker processes on this host), ``'parsl'``
            (a Parsl HighThroughputExecutor, on this host or on the nodes of
            ``provider``), or an engine registered with
            :func:`tether.faas.endpoint.engine.register_engine` or the
            ``tether.faas_engines`` entry points.
        min_workers: Workers kept even when idle (with a ``provider``: keep blocks with
            its ``min_blocks`` instead).
        max_workers: Most workers at once (with a ``provider``: workers per node).
        idle_timeout_s: A worker idle this long is stopped (down to ``min_workers``);
            with a ``provider``, a block idle this long is cancelled (down to
            ``min_blocks``).
        max_retries: How often a task whose worker died is run again before it fails with
            :class:`~tether.exceptions.WorkerLostError`.
        worker_start_timeout_s: How long a new worker process may take to start (its
            interpreter, or the container of its environment) before it is killed and
            its tasks are run again, up to ``max_retries`` times (5 minutes: room for a
            container to load). Time limits (``task_timeout``) count only once it is up.
        worker_prefetch: Tasks queued at one worker beyond the one it runs.
        max_result_bytes: Largest serialized result a task may return (10 MiB, as the
            service's ``max_payload_bytes``); a larger one fails the task with advice to
            return it by reference (a ``result_store``). The service's own limit applies
            too: the smaller one wins.
        max_output_bytes: Bytes of a task's stdout, and of its stderr, kept and sent
            back with its result (64 KiB; at most 128 KiB; 0: not captured): a longer
            stream keeps its first and last halves around a ``[... N bytes cut ...]``
            line.
        allowed_functions: Function ids this endpoint runs (``None``: every function of
            its owner). Others fail with
            :class:`~tether.exceptions.FunctionNotAllowedError`.
        allowed_serializers: Serializers this endpoint reads tasks with (``None``: all of
            tether's): strategy names or paths (``'DillCodeSource'``,
            ``'tether.faas.JSONData'``, ``'globus_compute_sdk.*Code'`` ...) or tether ids
            (``'source'``, ``'json'`` ...), at least one for code and one for data. Other
            tasks fail with :class:`~tether.exceptions.SerializerNotAllowedError`.
        redis_url: Redis server that :func:`tether.faas.endpoint.get_redis_client`
            connects to from tasks.
        heartbeat_s: Seconds between heartbeats to the service.
        ca_file: CA bundle to verify an HTTPS service with a private certificate.
        managers: With ``engine = "managers"``: how many managers (pools of
            ``max_workers`` workers each, ``worker_prefetch`` tasks queued beyond them)
            the endpoint routes its tasks to.
        routing: With ``engine = "managers"``: ``'warm'`` (a manager with room takes a
            waiting task whose function it has warm first) or ``'random'``.
        provider: Where the ``parsl`` engine gets its nodes (the ``[provider]`` table:
            Slurm, PBS Pro, LSF, HTCondor, Kubernetes, AWS, Google Cloud or local, with
            their blocks, walltime, partition or queue, account, launcher, worker_init
            ...): :mod:`tether.faas.endpoint.providers`; ``engine`` defaults to
            ``'parsl'`` with one. Unset: one block of ``max_workers`` workers on this
            host.
        metrics: The ``[metrics]`` table: where this agent's Prometheus metrics are
            served (default: nowhere; see ``docs/observability.md``).
        environments: The ``[environments.NAME]`` tables: Python environments that
            functions may ask for by name (:mod:`tether.faas.endpoint._environments`).
    """

    model_config = pydantic.ConfigDict(extra='forbid')

    name: str
    endpoint_id: str
    service_url: str
    engine: str = 'process'
    min_workers: int = pydantic.Field(default=0, ge=0)
    max_workers: int = pydantic.Field(default_factory=lambda: os.cpu_count() or 1, ge=1)
    idle_timeout_s: float = pydantic.Field(default=120.0, gt=0)
    max_retries: int = pydantic.Field(default=2, ge=0)
    worker_start_timeout_s: float = pydantic.Field(default=300.0, gt=0)
    worker_prefetch: int = pydantic.Field(default=1, ge=0)
    max_result_bytes: int = pydantic.Field(default=10 * 2**20, gt=0)
    max_output_bytes: int = pydantic.Field(default=64 * 1024, ge=0, le=128 * 1024)
    allowed_functions: list[str] | None = None
    allowed_serializers: list[str] | None = None
    redis_url: str = 'redis://127.0.0.1:6379/0'
    heartbeat_s: float = pydantic.Field(default=5.0, gt=0)
    ca_file: str | None = None
    managers: int = pydantic.Field(default=1, ge=1)
    routing: Literal['warm', 'random'] = 'warm'
    provider: ProviderConfig | None = None
    metrics: MetricsOptions = pydantic.Field(default_factory=MetricsOptions)
    environments: dict[str, EnvironmentConfig] = pydantic.Field(default_factory=dict)

    @pydantic.field_validator('environments')
    @classmethod
    def _check_environments(
        cls, value: dict[str, EnvironmentConfig]
    ) -> dict[str, EnvironmentConfig]:
        return check_names(value)

    @pydantic.model_validator(mode='before')
    @classmethod
    def _parsl_for_a_provider(cls, data: Any) -> Any:
        # A [provider] without an engine means the engine that uses it.
        if isinstance(data, dict) and data.get('provider') is not None and 'engine' not in data:
            return {**data, 'engine': 'parsl'}
        return data

    @pydantic.field_validator('allowed_serializers')
    @classmethod
    def _check_serializers(cls, value: list[str] | None) -> list[str] | None:
        from tether.faas._allow import allowed_ids

        allowed_ids(value)  # an unknown name or a list without code or data fails here
        return value

    @pydantic.field_validator('engine')
    @classmethod
    def _check_engine(cls, value: str) -> str:
        from tether.faas.endpoint.engine import engine_names

        names = engine_names()
        if value not in names:
            raise ValueError(
                f'unknown engine {value!r}: the engines are {", ".join(names)} (more come '
                "from register_engine() or the 'tether.faas_engines' entry points)"
            )
        return value

    @pydantic.model_validator(mode='after')
    def _check_workers(self) -> ComputeEndpointConfig:
        if self.min_workers > self.max_workers:
            raise ValueError(f'min_workers {self.min_workers} > max_workers {self.max_workers}')
        if self.provider is not None:
            if self.engine == 'process':
                raise ValueError(
                    'a [provider] is for engine = "parsl" (the process engine runs workers '
                    'on this host only): set engine = "parsl"'
                )
            if self.min_workers:
                raise ValueError(
                    'min_workers applies to workers on this host; with a [provider], keep '
                    'blocks (and their workers) with its min_blocks'
                )
        return self

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> ComputeEndpointConfig:
        """Read an endpoint's ``config.toml``."""
        try:
            return cls.model_validate(read_toml(path))
        except pydantic.ValidationError as e:
            raise ConfigError(
                f'invalid endpoint configuration in {path}: {validation_message(e)}'
            ) from e

    def write_toml(self, path: str | os.PathLike[str]) -> None:
        """Write this config as TOML (it holds no secret)."""
        import tomli_w

        data = self.model_dump(exclude_none=True)
        write_private(pathlib.Path(path), tomli_w.dumps(data).encode())


EndpointConfig = ComputeEndpointConfig
"""The former name of :class:`ComputeEndpointConfig` (kept: the same class)."""


def validation_message(error: pydantic.ValidationError) -> str:
    """A pydantic error as one line a person can act on: each bad field's dotted path
    (``provider.walltime``) and what is wrong with it."""
    parts = []
    for item in error.errors(include_url=False):
        where = '.'.join(str(x) for x in item['loc'] if not _is_union_tag(item['loc'], x))
        message = str(item['msg']).removeprefix('Value error, ')
        if item['type'] == 'extra_forbidden':
            message = 'not a setting here (a misspelt key, or one of another provider)'
        parts.append(f'{where}: {message}' if where else message)
    return '; '.join(parts)


def _is_union_tag(loc: tuple[Any, ...], part: Any) -> bool:
    # A discriminated union adds its tag to the path (provider.slurm.walltime): drop it.
    index = loc.index(part)
    return index > 0 and loc[index - 1] == 'provider' and isinstance(part, str)


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a TOML file, with a clear error when it is missing or invalid."""
    try:
        with open(path, 'rb') as f:
            return tomllib.load(f)
    except FileNotFoundError as e:
        raise ConfigError(f'configuration file {path} does not exist') from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f'{path} is not valid TOML: {e}') from e


def faas_home() -> pathlib.Path:
    """The directory of this user's endpoints and dev-service file.

    ``$TETHER_FAAS_HOME`` if set, else ``$XDG_RUNTIME_DIR/tether-faas`` when that runtime
    directory exists (it is private to the user), else ``~/.tether/faas``.
    """
    env = os.environ.get('TETHER_FAAS_HOME')
    if env:
        return pathlib.Path(env)
    runtime = os.environ.get('XDG_RUNTIME_DIR')
    if runtime and pathlib.Path(runtime).is_dir():
        return pathlib.Path(runtime) / 'tether-faas'
    return pathlib.Path.home() / '.tether' / 'faas'


def endpoint_dir(name: str) -> pathlib.Path:
    """Directory of the endpoint ``name`` (config, token, pid and log files)."""
    if not name or '/' in name or name.startswith('.'):
        raise ConfigError(f'invalid endpoint name {name!r}')
    return faas_home() / 'endpoints' / name


def dev_file() -> pathlib.Path:
    """The file through which ``tether faas dev`` announces itself to this user."""
    return faas_home() / 'dev.json'


def write_private(path: pathlib.Path, data: bytes) -> None:
    """Write ``data`` to ``path`` readable by its owner only (directories 0700)."""
    from tether._keyfile import write_private as replace_private

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    replace_private(path, data)


def read_dev_file() -> dict[str, Any] | None:
    """The running dev service's ``{url, token, endpoint_id, pid}``, or ``None``."""
    path = dev_file()
    try:
        st = path.stat()
        info = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    if st.st_mode & 0o077:
        raise ConfigError(f'{path} is readable by other users: refusing its token')
    pid = info.get('pid')
    if not isinstance(pid, int) or not pid_alive(pid):
        return None
    return dict(info)

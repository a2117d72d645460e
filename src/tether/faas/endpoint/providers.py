"""Where a compute endpoint's Parsl engine gets its nodes: the ``[provider]`` table.

An endpoint with ``engine = "parsl"`` runs its tasks on a Parsl HighThroughputExecutor
whose *blocks* (batch jobs, pods or instances, each of ``nodes_per_block`` nodes with
``max_workers`` workers per node) come from a *provider*. The ``[provider]`` table of the
endpoint's ``config.toml`` names it with ``type`` and holds its settings, as Parsl names
them::

    engine = "parsl"
    max_workers = 4            # workers per node
    idle_timeout_s = 300       # a block idle this long is cancelled (down to min_blocks)

    [provider]
    type = "slurm"
    partition = "debug"
    account = "proj123"
    walltime = "01:00:00"
    max_blocks = 4
    worker_init = "module load python"

Each type is a model here (:class:`SlurmProvider`, :class:`PBSProProvider`,
:class:`LSFProvider`, :class:`CondorProvider`, :class:`KubernetesProvider`,
:class:`AWSProvider`, :class:`GoogleCloudProvider`, :class:`LocalProvider`); unknown keys,
a malformed walltime, ``min_blocks > max_blocks`` or a multi-node block without a launcher
that starts workers on every node are refused when the configuration is read. The Parsl
objects are built by :func:`tether.plugins.parsl.make_provider` and
:func:`~tether.plugins.parsl.htex_config` (from :meth:`ProviderBase.provider_options`
and :meth:`ProviderBase.executor_options`).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, ClassVar, Literal

import pydantic

__all__ = [
    'AWSProvider',
    'CondorProvider',
    'GoogleCloudProvider',
    'KubernetesProvider',
    'LSFProvider',
    'Launcher',
    'LocalProvider',
    'PBSProProvider',
    'ProviderBase',
    'ProviderConfig',
    'SlurmProvider',
]

LauncherName = Literal[
    'aprun',
    'gnu_parallel',
    'jsrun',
    'mpiexec',
    'mpirun',
    'simple',
    'single_node',
    'srun',
    'srun_mpi',
]

_WALLTIME = re.compile(r'^\d+:[0-5]\d:[0-5]\d$')


class Launcher(pydantic.BaseModel):
    """How a block's command starts the workers on its nodes (``launcher = "srun"``, or
    ``launcher = {type = "srun", overrides = "--cpu-bind=none"}``).

    Attributes:
        type: ``single_node`` (one node: the block's first), ``srun``, ``srun_mpi``,
            ``mpiexec``, ``mpirun``, ``aprun``, ``jsrun``, ``gnu_parallel``, ``simple``
            (Parsl's launchers of those names).
        overrides: Extra arguments of the launch command (``srun``, ``mpiexec`` ...).
    """

    model_config = pydantic.ConfigDict(extra='forbid', frozen=True)

    type: LauncherName
    overrides: str = ''

    @pydantic.model_validator(mode='before')
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {'type': value} if isinstance(value, str) else value

    @property
    def multi_node(self) -> bool:
        """Whether it starts workers on every node of a block."""
        return self.type not in ('single_node', 'simple')

    def parsl_options(self) -> dict[str, Any]:
        """The launcher's arguments for :func:`tether.plugins.parsl.make_launcher`."""
        return {'overrides': self.overrides} if self.overrides else {}


class ProviderBase(pydantic.BaseModel):
    """What every provider holds.

    Attributes:
        type: The provider (the table's tag).
        init_blocks: Blocks requested when the endpoint starts.
        min_blocks: Blocks kept even when idle.
        max_blocks: Most blocks at once.
        parallelism: Blocks per waiting task, from 0 to 1 (1: as many as the tasks
            need, up to ``max_blocks``).
        worker_init: Shell lines run in each block before the workers start (``module
            load ...``, ``source venv/bin/activate``); tether puts its interpreter's
            directory first on ``PATH`` before them.
        address: Where the workers reach the endpoint (an IP address of this host that
            the compute nodes can route to); unset: Parsl tries every address of this
            host.
        worker_port_range: Ports the endpoint's interchange listens on for workers
            (``[first, last]``: open them in a firewall between nodes and this host).
        cores_per_worker: Cores each worker takes (workers per node: the fewest of
            ``max_workers``, cores / ``cores_per_worker`` and memory /
            ``mem_per_worker``).
        mem_per_worker: GB of memory each worker takes (unset: no bound).
        encrypted: Encrypt the traffic between the endpoint and its workers (CurveZMQ).
        heartbeat_period: Seconds between heartbeats of the workers' managers.
        heartbeat_threshold: Seconds without a heartbeat after which a manager, and the
            tasks it held, count as lost (a block ended by ``scancel`` or its walltime):
            they are retried (``max_retries``) or fail with ``WorkerLostError``.
        strategy_period: Seconds between scaling decisions (blocks submitted while
            tasks wait, idle ones cancelled).
        status_polling_interval: Seconds between polls of the scheduler for the blocks'
            states (how soon a block ended outside the endpoint is replaced); unset:
            Parsl's (60 s for batch schedulers).
        run_dir: Folder of Parsl's submit scripts and the blocks' output and logs, on a
            file system the compute nodes share with this host (kept when the endpoint
            stops). Unset: a new folder under ``~/.tether/faas-runs``, removed when the
            endpoint stops.
    """

    model_config = pydantic.ConfigDict(extra='forbid', frozen=True)

    type: str
    init_blocks: int = pydantic.Field(default=0, ge=0)
    min_blocks: int = pydantic.Field(default=0, ge=0)
    max_blocks: int = pydantic.Field(default=1, ge=1)
    parallelism: float = pydantic.Field(default=1.0, ge=0, le=1)
    worker_init: str = ''
    address: str | None = None
    worker_port_range: tuple[int, int] | None = None
    cores_per_worker: float = pydantic.Field(default=1.0, gt=0)
    mem_per_worker: float | None = pydantic.Field(default=None, gt=0)
    encrypted: bool = True
    heartbeat_period: int = pydantic.Field(default=30, ge=1)
    heartbeat_threshold: int = pydantic.Field(default=120, ge=1)
    strategy_period: float = pydantic.Field(default=5.0, gt=0)
    status_polling_interval: float | None = pydantic.Field(default=None, gt=0)
    run_dir: str | None = None

    # Fields that are tether's (the executor's, the scaling's), not the provider's.
    executor_fields: ClassVar[frozenset[str]] = frozenset(
        {
            'type',
            'address',
            'worker_port_range',
            'cores_per_worker',
            'mem_per_worker',
            'encrypted',
            'heartbeat_period',
            'heartbeat_threshold',
            'strategy_period',
            'status_polling_interval',
            'run_dir',
            'launcher',
            'worker_init',
        }
    )
    takes_worker_init: ClassVar[bool] = True
    """Whether Parsl's provider runs a ``worker_init`` (Google Cloud's does not)."""

    @pydantic.field_validator('address')
    @classmethod
    def _check_address(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ipaddress.ip_address(value)
            except ValueError:
                raise ValueError(
                    f'address must be an IP address of this host that the workers can reach '
                    f'(not a host name), not {value!r}'
                ) from None
        return value

    @pydantic.field_validator('worker_port_range')
    @classmethod
    def _check_ports(cls, value: tuple[int, int] | None) -> tuple[int, int] | None:
        if value is not None and not 0 < value[0] <= value[1] <= 65535:
            raise ValueError(f'worker_port_range must be [first, last] ports, not {list(value)}')
        return value

    @pydantic.model_validator(mode='after')
    def _check_blocks(self) -> ProviderBase:
        if self.min_blocks > self.max_blocks:
            raise ValueError(f'min_blocks {self.min_blocks} > max_blocks {self.max_blocks}')
        if self.init_blocks > self.max_blocks:
            raise ValueError(f'init_blocks {self.init_blocks} > max_blocks {self.max_blocks}')
        if self.heartbeat_threshold <= self.heartbeat_period:
            raise ValueError(
                f'heartbeat_threshold {self.heartbeat_threshold} must exceed '
                f'heartbeat_period {self.heartbeat_period} (a few periods: a lost manager is '
                'one that missed several heartbeats)'
            )
        return self

    def provider_options(self) -> dict[str, Any]:
        """The provider's own arguments (for :func:`tether.plugins.parsl.make_provider`),
        without ``worker_init`` and ``launcher`` (the engine adds them)."""
        data = self.model_dump(exclude=set(self.executor_fields))
        return {k: v for k, v in data.items() if v is not None}

    def executor_options(self) -> dict[str, Any]:
        """HighThroughputExecutor options (for :func:`tether.plugins.parsl.htex_config`)."""
        options: dict[str, Any] = {
            'address': self.address,
            'encrypted': self.encrypted,
            'cores_per_worker': self.cores_per_worker,
            'heartbeat_period': self.heartbeat_period,
            'heartbeat_threshold': self.heartbeat_threshold,
            'strategy_period': self.strategy_period,
        }
        if self.mem_per_worker is not None:
            options['mem_per_worker'] = self.mem_per_worker
        if self.worker_port_range is not None:
            options['worker_port_range'] = self.worker_port_range
        return options

    def launcher_config(self) -> Launcher | None:
        """The launcher (providers without one: ``None``)."""
        return None


def _walltime(value: str) -> str:
    if not _WALLTIME.match(value):
        raise ValueError(f'walltime must be HH:MM:SS (as "01:30:00"), not {value!r}')
    return value


Walltime = Annotated[str, pydantic.AfterValidator(_walltime)]


class _Launched(ProviderBase):
    """A provider whose blocks run a launch command on their nodes."""

    nodes_per_block: int = pydantic.Field(default=1, ge=1)
    launcher: Launcher = Launcher(type='single_node')

    @pydantic.model_validator(mode='after')
    def _check_launcher(self) -> _Launched:
        if self.nodes_per_block > 1 and not self.launcher.multi_node:
            raise ValueError(
                f'nodes_per_block = {self.nodes_per_block} needs a launcher that starts '
                f'workers on every node (srun, mpiexec, aprun, jsrun ...), not '
                f'{self.launcher.type!r}, which uses one node of each block'
            )
        return self

    def launcher_config(self) -> Launcher | None:
        return self.launcher


class _Batch(_Launched):
    """A batch scheduler's provider: jobs with a walltime and scheduler options."""

    walltime: Walltime = '01:00:00'
    scheduler_options: str = ''


class LocalProvider(_Launched):
    """Blocks are processes on this host (the endpoint's default without a table)."""

    type: Literal['local'] = 'local'
    init_blocks: int = pydantic.Field(default=1, ge=0)


class SlurmProvider(_Batch):
    """Blocks are Slurm jobs (``sbatch``); extra ``#SBATCH`` lines go in
    ``scheduler_options``."""

    type: Literal['slurm'] = 'slurm'
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    clusters: str | None = None
    cores_per_node: int | None = pydantic.Field(default=None, ge=1)
    mem_per_node: int | None = pydantic.Field(default=None, ge=1)
    gpus_per_node: int | None = pydantic.Field(default=None, ge=1)
    gres: str | None = None
    exclusive: bool = True


class PBSProProvider(_Batch):
    """Blocks are PBS Pro jobs (``qsub``); ``select_options`` extends the ``-l select``
    line, ``scheduler_options`` adds ``#PBS`` lines."""

    type: Literal['pbspro'] = 'pbspro'
    queue: str | None = None
    account: str | None = None
    cpus_per_node: int = pydantic.Field(default=1, ge=1)
    select_options: str = ''


class LSFProvider(_Batch):
    """Blocks are LSF jobs (``bsub``); ``project`` is the LSF project charged."""

    type: Literal['lsf'] = 'lsf'
    queue: str | None = None
    project: str | None = None
    cores_per_node: int | None = pydantic.Field(default=None, ge=1)
    cores_per_block: int | None = pydantic.Field(default=None, ge=1)
    request_by_nodes: bool = True
    bsub_redirection: bool = False


class CondorProvider(_Batch):
    """Blocks are HTCondor jobs (``condor_submit``)."""

    type: Literal['condor'] = 'condor'
    project: str = ''
    cores_per_slot: int | None = pydantic.Field(default=None, ge=1)
    mem_per_slot: float | None = pydantic.Field(default=None, gt=0)
    requirements: str = ''
    environment: dict[str, str] | None = None
    transfer_input_files: list[str] = []


class KubernetesProvider(ProviderBase):
    """Blocks are pods of ``image`` (which must hold tether and Parsl) in ``namespace``."""

    type: Literal['kubernetes'] = 'kubernetes'
    image: str
    namespace: str = 'default'
    nodes_per_block: int = pydantic.Field(default=1, ge=1)
    max_cpu: float = pydantic.Field(default=2, gt=0)
    max_mem: str = '500Mi'
    init_cpu: float = pydantic.Field(default=1, gt=0)
    init_mem: str = '250Mi'
    secret: str | None = None
    service_account_name: str | None = None
    pod_name: str | None = None
    user_id: str | None = None
    group_id: str | None = None
    run_as_non_root: bool = False
    persistent_volumes: list[tuple[str, str]] = []
    extra_requests: dict[str, str] | None = None
    extra_limits: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class AWSProvider(_Launched):
    """Blocks are EC2 instances of ``image_id`` (credentials: ``profile`` or the usual
    AWS environment)."""

    type: Literal['aws'] = 'aws'
    image_id: str
    key_name: str
    instance_type: str = 't2.small'
    region: str = 'us-east-2'
    spot_max_bid: float = pydantic.Field(default=0, ge=0)
    key_file: str | None = None
    profile: str | None = None
    iam_instance_profile_arn: str = ''
    state_file: str | None = None
    walltime: Walltime = '01:00:00'
    linger: bool = False


class GoogleCloudProvider(ProviderBase):
    """Blocks are Compute Engine instances (``key_file``: a service account's JSON key).
    Parsl's Google provider takes no ``worker_init``: put what the workers need in the
    image."""

    type: Literal['googlecloud'] = 'googlecloud'
    project_id: str
    key_file: str
    region: str
    os_project: str
    os_family: str
    google_version: str = 'v1'
    instance_type: str = 'n1-standard-1'
    launcher: Launcher = Launcher(type='single_node')
    takes_worker_init: ClassVar[bool] = False

    @pydantic.field_validator('worker_init')
    @classmethod
    def _no_worker_init(cls, value: str) -> str:
        if value:
            raise ValueError(
                "Parsl's Google Cloud provider runs no worker_init: build it into the image"
            )
        return value

    def launcher_config(self) -> Launcher | None:
        return self.launcher


ProviderConfig = Annotated[
    LocalProvider
    | SlurmProvider
    | PBSProProvider
    | LSFProvider
    | CondorProvider
    | KubernetesProvider
    | AWSProvider
    | GoogleCloudProvider,
    pydantic.Field(discriminator='type'),
]
"""The ``[provider]`` table: one of the provider models, chosen by its ``type``."""

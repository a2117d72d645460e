"""Parsl's parts as configs: provider, launcher, address, manager selector, monitoring, HTEX.

Each part names a Parsl class or function by ``kind`` from an allowlist (a short kind or
Parsl's class name, so TaPS-style TOML reads as is); every other field is passed to it as a
keyword argument.

Public home: :mod:`tether.bench.executor.parsl` (which exports every name).
"""

from __future__ import annotations

from typing import Any, ClassVar

import pydantic

from tether.plugins.parsl import interchange_command, worker_init
from tether.store.config import import_from_path

PROVIDERS: dict[str, str] = {
    'condor': 'parsl.providers.CondorProvider',
    'gridengine': 'parsl.providers.GridEngineProvider',
    'local': 'parsl.providers.LocalProvider',
    'lsf': 'parsl.providers.LSFProvider',
    'pbspro': 'parsl.providers.PBSProProvider',
    'slurm': 'parsl.providers.SlurmProvider',
    'torque': 'parsl.providers.TorqueProvider',
}
"""Provider kinds: kind -> class (each class's own name is a kind too)."""

LAUNCHERS: dict[str, str] = {
    'aprun': 'parsl.launchers.AprunLauncher',
    'jsrun': 'parsl.launchers.JsrunLauncher',
    'mpiexec': 'parsl.launchers.MpiExecLauncher',
    'mpirun': 'parsl.launchers.MpiRunLauncher',
    'simple': 'parsl.launchers.SimpleLauncher',
    'single-node': 'parsl.launchers.SingleNodeLauncher',
    'srun': 'parsl.launchers.SrunLauncher',
}
"""Launcher kinds: kind -> class (each class's own name is a kind too)."""

ADDRESSES: dict[str, str] = {
    name: f'parsl.addresses.{name}'
    for name in (
        'address_by_hostname',
        'address_by_interface',
        'address_by_query',
        'address_by_route',
        'get_any_address',
    )
}
"""Address kinds: the functions of ``parsl.addresses`` that find this host's address."""

MANAGER_SELECTORS: dict[str, str] = {
    name: f'parsl.executors.high_throughput.manager_selector.{name}'
    for name in ('BlockIdManagerSelector', 'RandomManagerSelector')
}
"""Manager-selector kinds of HTEX."""


def _with_class_names(table: dict[str, str]) -> dict[str, str]:
    return {**table, **{path.rsplit('.', 1)[1]: path for path in table.values()}}


_PROVIDERS = _with_class_names(PROVIDERS)
_LAUNCHERS = _with_class_names(LAUNCHERS)


class _Part(pydantic.BaseModel):
    """A kind from an allowlist; the other fields are the keyword arguments."""

    model_config = pydantic.ConfigDict(extra='allow')
    _table: ClassVar[dict[str, str]] = {}
    _what: ClassVar[str] = 'kind'

    kind: str

    @pydantic.field_validator('kind')
    @classmethod
    def _known(cls, kind: str) -> str:
        table = cls._table
        if kind not in table:
            raise ValueError(f'unknown {cls._what} {kind!r}; kinds: {", ".join(sorted(table))}')
        return kind

    def _options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    def _build(self, **more: Any) -> Any:
        table = self._table
        return import_from_path(table[self.kind])(**self._options(), **more)


class LauncherConfig(_Part):
    """A Parsl launcher: ``kind`` (``'srun'`` or ``'SrunLauncher'`` ...) and its options."""

    _table: ClassVar[dict[str, str]] = _LAUNCHERS
    _what: ClassVar[str] = 'launcher'

    def get_launcher(self) -> Any:
        """Build the launcher."""
        return self._build()


class AddressConfig(_Part):
    """How to find the address workers connect to (a function of :data:`ADDRESSES`)."""

    _table: ClassVar[dict[str, str]] = ADDRESSES
    _what: ClassVar[str] = 'address'

    def get_address(self) -> str:
        """Call the address function."""
        return str(self._build())


class ManagerSelectorConfig(_Part):
    """HTEX's manager selector by class name (:data:`MANAGER_SELECTORS`)."""

    _table: ClassVar[dict[str, str]] = MANAGER_SELECTORS
    _what: ClassVar[str] = 'manager selector'

    def get_manager_selector(self) -> Any:
        """Build the selector."""
        return self._build()


class ProviderConfig(_Part):
    """A Parsl provider: a kind of :data:`PROVIDERS`, its options, and a launcher.

    Options are the ``options`` table and any other field (TaPS writes them beside
    ``kind``); ``launcher`` is a launcher kind or a :class:`LauncherConfig`.
    """

    _table: ClassVar[dict[str, str]] = _PROVIDERS
    _what: ClassVar[str] = 'provider'

    kind: str = pydantic.Field(
        default='local', description=f'one of {", ".join(sorted(PROVIDERS))}'
    )
    options: dict[str, Any] = pydantic.Field(
        default_factory=dict,
        description='keyword arguments of the provider (a JSON object on the CLI)',
    )
    launcher: str | LauncherConfig | None = pydantic.Field(
        default=None,
        description=f"one of {', '.join(sorted(LAUNCHERS))} (default: the provider's)",
    )

    @pydantic.field_validator('launcher')
    @classmethod
    def _known_launcher(cls, launcher: str | LauncherConfig | None) -> Any:
        if isinstance(launcher, str):
            return LauncherConfig(kind=launcher)
        return launcher

    def get_provider(self) -> Any:
        """Build the provider."""
        options = {**self._options(), **self.options}
        options['worker_init'] = worker_init(options.get('worker_init'))
        if isinstance(self.launcher, LauncherConfig):
            options['launcher'] = self.launcher.get_launcher()
        return import_from_path(_PROVIDERS[self.kind])(**options)


class MonitoringConfig(pydantic.BaseModel):
    """Parsl's monitoring hub: its options, with ``hub_address`` a string or an address."""

    model_config = pydantic.ConfigDict(extra='allow')

    hub_address: str | AddressConfig | None = None

    def get_monitoring(self) -> Any:
        """Build the ``MonitoringHub``."""
        from parsl.monitoring import MonitoringHub

        options = dict(self.model_extra or {})
        address = self.hub_address
        if isinstance(address, AddressConfig):
            address = address.get_address()
        if address is not None:
            options['hub_address'] = address
        return MonitoringHub(**options)


class HTExConfig(pydantic.BaseModel):
    """A HighThroughputExecutor: provider, address, manager selector and other options."""

    model_config = pydantic.ConfigDict(extra='allow')

    provider: ProviderConfig = pydantic.Field(default_factory=ProviderConfig)
    address: str | AddressConfig | None = None
    manager_selector: ManagerSelectorConfig | None = None

    def options(self) -> dict[str, Any]:
        """The keyword arguments of HighThroughputExecutor (all but provider)."""
        options: dict[str, Any] = {
            'label': 'tether-bench-htex',
            'interchange_launch_cmd': interchange_command(),
            **(self.model_extra or {}),
        }
        address = self.address
        if isinstance(address, AddressConfig):
            address = address.get_address()
        if address is not None:
            options['address'] = address
        if self.manager_selector is not None:
            options['manager_selector'] = self.manager_selector.get_manager_selector()
        return options

    def get_executor(self) -> Any:
        """Build the HighThroughputExecutor."""
        from parsl.executors import HighThroughputExecutor

        return HighThroughputExecutor(provider=self.provider.get_provider(), **self.options())

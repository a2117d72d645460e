"""An endpoint's ``[provider]`` table: validated with clear errors, written and read back,
given by ``tether faas endpoint configure`` options, and built into Parsl's objects
(tether.plugins.parsl) as each provider expects them."""

from __future__ import annotations

import importlib.util
import pathlib
import shlex
import shutil
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from tests.faas.conftest import new_user
from tether.exceptions import ConfigError
from tether.faas import Client, ComputeEndpointConfig
from tether.faas._server import ServiceThread
from tether.faas.endpoint import providers
from tether.faas.endpoint._parsl import ParslEngine
from tether.plugins.parsl import make_launcher, make_provider

BASE = 'name = "ep"\nendpoint_id = "e1"\nservice_url = "http://127.0.0.1:1"\n'


def read(tmp_path: pathlib.Path, text: str) -> ComputeEndpointConfig:
    path = tmp_path / 'config.toml'
    path.write_text(BASE + textwrap.dedent(text))
    return ComputeEndpointConfig.from_toml(path)


def refused(tmp_path: pathlib.Path, text: str, *words: str) -> str:
    with pytest.raises(ConfigError) as info:
        read(tmp_path, text)
    message = str(info.value)
    assert '\n' not in message, message
    assert 'errors.pydantic.dev' not in message
    for word in words:
        assert word in message, message
    return message


def test_a_slurm_table_is_read_typed_and_round_trips(tmp_path: pathlib.Path) -> None:
    config = read(
        tmp_path,
        """
        max_workers = 4
        [provider]
        type = "slurm"
        partition = "debug"
        account = "proj1"
        walltime = "02:00:00"
        nodes_per_block = 2
        max_blocks = 3
        launcher = { type = "srun", overrides = "--cpu-bind=none" }
        worker_init = "module load python"
        scheduler_options = "#SBATCH --constraint=cpu"
        """,
    )
    assert config.engine == 'parsl'  # a [provider] means the engine that uses it
    provider = config.provider
    assert isinstance(provider, providers.SlurmProvider)
    assert (provider.partition, provider.account, provider.walltime) == (
        'debug',
        'proj1',
        '02:00:00',
    )
    assert provider.launcher == providers.Launcher(type='srun', overrides='--cpu-bind=none')
    config.write_toml(tmp_path / 'again.toml')
    assert ComputeEndpointConfig.from_toml(tmp_path / 'again.toml') == config


@pytest.mark.parametrize(
    ('table', 'cls'),
    [
        ('type = "local"', providers.LocalProvider),
        ('type = "slurm"', providers.SlurmProvider),
        ('type = "pbspro"\nqueue = "workq"\ncpus_per_node = 8', providers.PBSProProvider),
        ('type = "lsf"\nqueue = "batch"\nproject = "p1"', providers.LSFProvider),
        ('type = "condor"\nrequirements = "OpSys == \\"LINUX\\""', providers.CondorProvider),
        ('type = "kubernetes"\nimage = "site/tether:1"', providers.KubernetesProvider),
        ('type = "aws"\nimage_id = "ami-1"\nkey_name = "k"', providers.AWSProvider),
        (
            'type = "googlecloud"\nproject_id = "p"\nkey_file = "k.json"\nregion = "r"\n'
            'os_project = "debian-cloud"\nos_family = "debian-12"',
            providers.GoogleCloudProvider,
        ),
    ],
)
def test_every_provider_type_is_a_table(tmp_path: pathlib.Path, table: str, cls: type) -> None:
    config = read(tmp_path, f'[provider]\n{table}\n')
    assert type(config.provider) is cls
    config.write_toml(tmp_path / 'again.toml')
    assert ComputeEndpointConfig.from_toml(tmp_path / 'again.toml') == config


@pytest.mark.parametrize(
    ('text', 'words'),
    [
        ('[provider]\ntype = "sge"', ["'sge'", 'slurm', 'pbspro', 'kubernetes']),
        ('[provider]\ntype = "slurm"\npartiton = "x"', ['provider.partiton', 'misspelt']),
        ('[provider]\ntype = "pbspro"\npartition = "x"', ['provider.partition']),
        ('[provider]\ntype = "slurm"\nwalltime = "2h"', ['provider.walltime', 'HH:MM:SS']),
        ('[provider]\ntype = "slurm"\nmin_blocks = 2', ['min_blocks 2 > max_blocks 1']),
        ('[provider]\ntype = "slurm"\nnodes_per_block = 4', ['nodes_per_block = 4', 'srun']),
        ('[provider]\ntype = "slurm"\nlauncher = "ssh"', ['provider.launcher']),
        ('[provider]\ntype = "slurm"\naddress = "login1"', ['IP address']),
        ('[provider]\ntype = "slurm"\nheartbeat_threshold = 10', ['heartbeat_threshold 10']),
        ('[provider]\ntype = "kubernetes"', ['provider.image', 'required']),
        ('engine = "process"\n[provider]\ntype = "slurm"', ['engine = "parsl"']),
        ('min_workers = 1\n[provider]\ntype = "slurm"', ['min_blocks']),
        (
            '[provider]\ntype = "googlecloud"\nproject_id = "p"\nkey_file = "k"\nregion = "r"\n'
            'os_project = "o"\nos_family = "f"\nworker_init = "x"',
            ['worker_init', 'image'],
        ),
    ],
)
def test_bad_tables_are_refused_in_one_line_naming_the_setting(
    tmp_path: pathlib.Path, text: str, words: list[str]
) -> None:
    refused(tmp_path, text, str(tmp_path / 'config.toml'), *words)


@pytest.fixture
def built() -> Iterator[list[Any]]:
    """Parsl configurations built by the tests (their run folders removed after)."""
    made: list[Any] = []
    yield made
    for config in made:
        shutil.rmtree(config.run_dir, ignore_errors=True)


def parsl_config(config: ComputeEndpointConfig, built: list[Any]) -> Any:
    engine = ParslEngine(
        config, lambda ids: None, lambda h, p: None, {'TETHER_FAAS_REDIS_URL': 'redis://r:1/0'}
    )
    made = engine._default_config()
    built.append(made)
    return made


def test_a_slurm_endpoint_builds_htex_on_slurm(tmp_path: pathlib.Path, built: list[Any]) -> None:
    from parsl.launchers import SrunLauncher
    from parsl.providers import SlurmProvider

    config = read(
        tmp_path,
        """
        max_workers = 3
        idle_timeout_s = 42
        max_retries = 4
        [provider]
        type = "slurm"
        partition = "debug"
        account = "proj1"
        walltime = "00:30:00"
        nodes_per_block = 2
        init_blocks = 1
        max_blocks = 5
        exclusive = false
        launcher = { type = "srun", overrides = "--mpi=none" }
        worker_init = "module load python"
        scheduler_options = "#SBATCH --constraint=cpu"
        address = "10.0.0.5"
        heartbeat_period = 2
        heartbeat_threshold = 7
        status_polling_interval = 3
        """,
    )
    made = parsl_config(config, built)
    (executor,) = made.executors
    provider = executor.provider
    assert isinstance(provider, SlurmProvider)
    assert (provider.partition, provider.account, provider.walltime) == (
        'debug',
        'proj1',
        '00:30:00',
    )
    assert (provider.nodes_per_block, provider.init_blocks, provider.max_blocks) == (2, 1, 5)
    assert provider.exclusive is False
    assert provider.scheduler_options.startswith('#SBATCH --constraint=cpu\n')
    assert provider.status_polling_interval == 3
    assert isinstance(provider.launcher, SrunLauncher)
    assert provider.launcher.overrides == '--mpi=none'
    # The block's shell: this interpreter's bin first, the endpoint's environment, then
    # the site's lines.
    lines = provider.worker_init
    assert lines.index('export PATH=') < lines.index('TETHER_FAAS_REDIS_URL')
    assert lines.index('TETHER_FAAS_SYS_PATH') < lines.index('module load python')
    assert 'export TETHER_FAAS_REDIS_URL=redis://r:1/0' in lines
    shlex.split(lines)  # quoted: the sys.path JSON does not break the shell line
    assert executor.max_workers_per_node == 3
    assert executor.address == '10.0.0.5'
    assert (executor.heartbeat_period, executor.heartbeat_threshold) == (2, 7)
    assert made.max_idletime == 42
    assert made.retries == 4
    assert made.retry_handler is not None
    assert made.strategy == 'htex_auto_scale'
    # Parsl's scripts and the blocks' logs: in the home folder (shared with compute nodes).
    assert pathlib.Path(made.run_dir).parent == pathlib.Path.home() / '.tether' / 'faas-runs'


def test_a_run_dir_of_the_site_is_used_and_kept(tmp_path: pathlib.Path) -> None:
    shared = tmp_path / 'shared-runs'
    config = read(tmp_path, f'[provider]\ntype = "local"\nrun_dir = "{shared}"\n')
    engine = ParslEngine(config, lambda ids: None, lambda h, p: None, {})
    assert engine._default_config().run_dir == str(shared)
    engine.stop()  # never started: nothing to stop, and the site's folder is not removed
    assert engine._run_dir == ''


@pytest.mark.parametrize(
    ('table', 'parsl_class', 'settings'),
    [
        (
            'type = "pbspro"\nqueue = "workq"\naccount = "a1"\ncpus_per_node = 8\n'
            'select_options = "ngpus=1"\nwalltime = "00:10:00"',
            'PBSProProvider',
            {'queue': 'workq', 'account': 'a1', 'cpus_per_node': 8, 'walltime': '00:10:00'},
        ),
        (
            'type = "lsf"\nqueue = "batch"\nproject = "p1"\nlauncher = "jsrun"',
            'LSFProvider',
            {'queue': 'batch', 'project': 'p1'},
        ),
        (
            'type = "condor"\nproject = "p2"\nrequirements = "Memory > 1024"',
            'CondorProvider',
            {'project': 'p2', 'requirements': 'Memory > 1024'},
        ),
        ('type = "local"\nmax_blocks = 2', 'LocalProvider', {'max_blocks': 2}),
    ],
)
def test_other_schedulers_build_their_parsl_provider(
    tmp_path: pathlib.Path,
    built: list[Any],
    table: str,
    parsl_class: str,
    settings: dict[str, Any],
) -> None:
    made = parsl_config(read(tmp_path, f'[provider]\n{table}\n'), built)
    provider = made.executors[0].provider
    assert parsl_class in [c.__name__ for c in type(provider).__mro__]
    for key, value in settings.items():
        assert getattr(provider, key) == value, key


@pytest.mark.parametrize(
    ('table', 'package'),
    [
        ('type = "kubernetes"\nimage = "i"', 'kubernetes'),
        ('type = "aws"\nimage_id = "ami-1"\nkey_name = "k"', 'boto3'),
    ],
)
def test_a_provider_whose_packages_are_missing_is_a_config_error(
    tmp_path: pathlib.Path, built: list[Any], table: str, package: str
) -> None:
    if importlib.util.find_spec(package) is not None:
        pytest.skip(f'{package} is installed here')
    config = read(tmp_path, f'[provider]\n{table}\n')
    with pytest.raises(ConfigError, match=f'could not be built.*{package}'):
        parsl_config(config, built)


def test_unknown_providers_and_launchers_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"unknown Parsl provider 'sge'.*slurm"):
        make_provider('sge', {})
    with pytest.raises(ConfigError, match=r"unknown Parsl launcher 'ssh'.*srun"):
        make_launcher('ssh')
    with pytest.raises(ConfigError, match='srun launcher'):
        make_launcher('srun', bogus=1)
    with pytest.raises(ConfigError, match='refused its options'):
        make_provider('local', {'partition': 'x'})


def test_configure_writes_the_provider_options(
    dev_service: ServiceThread, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tether.faas.endpoint.cli import endpoint

    _user, token = new_user(dev_service)
    home = tmp_path / 'home'
    monkeypatch.setenv('TETHER_FAAS_HOME', str(home))
    monkeypatch.setenv('TETHER_FAAS_TOKEN', token)
    common = ['configure', '--service', dev_service.url, '--max-workers', '8']
    runner = CliRunner()
    out = runner.invoke(
        endpoint,
        [
            *common[:1],
            'hpc',
            *common[1:],
            '--provider',
            'slurm',
            '--partition',
            'compute',
            '--account',
            'proj9',
            '--walltime',
            '00:45:00',
            '--nodes-per-block',
            '2',
            '--launcher',
            'srun',
            '--max-blocks',
            '4',
            '--worker-init',
            'source ~/env/bin/activate',
            '--provider-option',
            'exclusive=false',
            '--provider-option',
            'qos=debug',
        ],
    )
    assert out.exit_code == 0, out.output
    config = ComputeEndpointConfig.from_toml(home / 'endpoints' / 'hpc' / 'config.toml')
    assert config.engine == 'parsl'
    assert config.provider == providers.SlurmProvider(
        partition='compute',
        account='proj9',
        walltime='00:45:00',
        nodes_per_block=2,
        launcher=providers.Launcher(type='srun'),
        max_blocks=4,
        worker_init='source ~/env/bin/activate',
        exclusive=False,
        qos='debug',
    )

    # A bad setting is refused in one line before the service registers anything.
    bad = runner.invoke(
        endpoint, [*common[:1], 'bad', *common[1:], '--provider', 'slurm', '--walltime', '3h']
    )
    assert bad.exit_code == 1
    assert 'provider.walltime' in bad.output
    assert 'HH:MM:SS' in bad.output
    orphan = runner.invoke(endpoint, [*common[:1], 'orphan', *common[1:], '--partition', 'x'])
    assert orphan.exit_code == 1
    assert 'need --provider' in orphan.output
    with Client(dev_service.url, token) as client:
        names = {e['name'] for e in client.list_endpoints()}
    assert 'hpc' in names
    assert not names & {'bad', 'orphan'}
    assert not (home / 'endpoints' / 'bad').exists()


def test_the_example_configurations_of_the_docs_are_valid(tmp_path: pathlib.Path) -> None:
    import re

    page = pathlib.Path(__file__).resolve().parents[2] / 'docs' / 'faas.md'
    blocks = re.findall(r'^```toml\n(.*?)^```', page.read_text(), re.MULTILINE | re.DOTALL)
    examples = [b for b in blocks if '[provider]' in b]
    assert len(examples) >= 8
    kinds = set()
    for text in examples:
        config = read(tmp_path, text)
        assert config.engine in ('parsl', 'managers')  # managers: in the provider's blocks
        assert config.provider is not None
        kinds.add(config.provider.type)
    assert kinds >= {'slurm', 'pbspro', 'lsf', 'condor', 'kubernetes', 'aws', 'local'}

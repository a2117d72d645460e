"""Per-function Python environments of an endpoint: the ``[environments]`` table.

A function may ask for the Python environment it needs (``environment=`` at
registration): a name this endpoint's ``config.toml`` declares, or an absolute path of an
interpreter or virtual environment on the endpoint::

    [environments.ml]
    python = "/opt/envs/ml"              # a virtual environment (or .../bin/python)
    max_workers = 2                      # its own pool: at most this many workers

    [environments.gpu]
    command = "apptainer exec --nv {image} {python}"
    image = "/images/pytorch.sif"
    python = "python3"                   # the interpreter inside the container

Each environment has its own pool of warm workers (started with that interpreter, at
most ``max_workers``, idle ones stopped after the endpoint's ``idle_timeout_s`` down to
``min_workers``). Before its first task, an environment is *probed*: its interpreter is
run once to report its Python version, its tether version and the serializers it can
read (:func:`probe`); a task whose function it cannot read is refused with a clear error
instead of killing workers (``WorkerLostError``). The endpoint reports what it probed to
the service (``environments`` in its metadata), where the SDK checks submissions.
"""

from __future__ import annotations

import json
import os
import platform
import selectors
import shlex
import subprocess
import sys
import threading
import time
from typing import Any

import pydantic

from tether.exceptions import ConfigError
from tether.faas._functions_env import DEFAULT, check_environment_name, check_readable

__all__ = [
    'MAX_ENVIRONMENTS',
    'EnvironmentConfig',
    'Environments',
    'argv_of',
    'check_names',
    'default_info',
    'interpreter_of',
    'probe',
    'worker_sys_path',
]

MAX_ENVIRONMENTS = 16
"""Most environments (declared ones and paths named by functions) an endpoint runs."""

_MAX_ERROR = 2000  # characters of an environment's error the service is told
_PROBE_TIMEOUT = 120.0  # a container runtime may pull or unpack its image first
_PROBE_OUTPUT = 64 * 1024  # bytes a probe may print (stdout and stderr together)

# Run by the environment's interpreter: what it can read. Printed on a line of its own
# (a container runtime may print a banner around it).
_PROBE = """
import json, os, sys
for p in json.loads(os.environ.get('TETHER_FAAS_SYS_PATH', '[]')):
    if p not in sys.path:
        sys.path.append(p)
info = {'python': '%d.%d.%d' % sys.version_info[:3], 'executable': sys.executable}
serializers = ['json', 'source']
try:
    import tether
    info['tether'] = tether.__version__
    serializers.append('tether')
except Exception as e:
    info['tether'] = None
    info['tether_error'] = '%s: %s' % (type(e).__name__, e)
try:
    import cloudpickle
    serializers.append('pickle')
except Exception:
    pass
info['serializers'] = sorted(serializers)
print('TETHER-ENVIRONMENT ' + json.dumps(info), flush=True)
"""


class EnvironmentConfig(pydantic.BaseModel):
    """One ``[environments.NAME]`` table of an endpoint's ``config.toml``.

    Attributes:
        python: The interpreter: a path of a ``python`` executable, or of a virtual
            environment's directory (its ``bin/python`` is used). With ``command``, the
            interpreter as the container sees it (``python3`` by default).
        command: A command template that starts the interpreter inside a container
            (``apptainer exec {image} {python}``, ``podman run --rm -i --preserve-fds=1
            {image} {python}``): ``{python}`` is replaced by ``python`` and ``{image}``
            by ``image``. The runtime must pass the worker's inherited file descriptor
            to the interpreter (``apptainer``/``singularity exec`` and ``env`` do;
            ``docker run`` does not).
        image: What ``{image}`` stands for.
        max_workers: Most workers of this environment at once (default: the
            endpoint's ``max_workers``).
        min_workers: Workers of this environment kept even when idle.
    """

    model_config = pydantic.ConfigDict(extra='forbid', frozen=True)

    python: str | None = None
    command: str | None = None
    image: str | None = None
    max_workers: int | None = pydantic.Field(default=None, ge=1)
    min_workers: int = pydantic.Field(default=0, ge=0)

    @pydantic.model_validator(mode='after')
    def _check(self) -> EnvironmentConfig:
        if self.command is None:
            if not self.python:
                raise ValueError('set python (an interpreter or virtual environment path)')
            if not os.path.isabs(self.python):
                raise ValueError(f'python must be an absolute path, not {self.python!r}')
            if self.image is not None:
                raise ValueError('image is used by a command template: set command too')
        else:
            if '{python}' not in self.command:
                raise ValueError(
                    f'command {self.command!r} must contain {{python}} (where the '
                    'interpreter goes)'
                )
            if ('{image}' in self.command) != (self.image is not None):
                raise ValueError(
                    'command uses {image} but image is not set'
                    if self.image is None
                    else 'image is set but command does not use {image}'
                )
            try:
                self.command.format(python='python3', image='image')
                shlex.split(self.command)
            except (KeyError, IndexError, ValueError) as e:
                raise ValueError(
                    f'command {self.command!r} is not a valid template (only {{python}} '
                    f'and {{image}} may appear in braces): {e}'
                ) from None
        if self.max_workers is not None and self.min_workers > self.max_workers:
            raise ValueError(f'min_workers {self.min_workers} > max_workers {self.max_workers}')
        return self


def check_names(environments: dict[str, EnvironmentConfig]) -> dict[str, EnvironmentConfig]:
    """The ``[environments]`` table's names: plain names, not ``default``, not too many."""
    for name in environments:
        if name == DEFAULT or name.startswith('/'):
            raise ValueError(f'{name!r} cannot name an environment (it is the default one)')
        check_environment_name(name)
    if len(environments) > MAX_ENVIRONMENTS:
        raise ValueError(f'at most {MAX_ENVIRONMENTS} environments, not {len(environments)}')
    return environments


def interpreter_of(path: str, what: str) -> str:
    """The interpreter of ``path`` (itself, or a virtual environment's ``bin/python``).

    Raises:
        ConfigError: there is no executable interpreter there.
    """
    candidate = path
    if os.path.isdir(path):
        for name in ('python', 'python3'):
            candidate = os.path.join(path, 'bin', name)
            if os.path.exists(candidate):
                break
    if not os.path.isfile(candidate) or not os.access(candidate, os.X_OK):
        raise ConfigError(
            f'{what}: {path} is not a Python interpreter or a virtual environment '
            f'(no executable {candidate}); fix the path in the endpoint configuration'
        )
    return candidate


def argv_of(name: str, environments: dict[str, EnvironmentConfig]) -> list[str]:
    """The command that starts a Python of environment ``name`` (a declared name or an
    absolute path; ``''`` is the default: this interpreter).

    Raises:
        ConfigError: unknown name, or no interpreter where it says.
    """
    if not name:
        return [sys.executable]
    if name.startswith('/'):
        return [interpreter_of(name, f'environment {name!r}')]
    env = environments.get(name)
    if env is None:
        known = ', '.join(sorted(environments)) or 'none besides the default'
        raise ConfigError(
            f'this endpoint has no environment {name!r} (its environments: {known}); '
            f'declare it under [environments.{name}] in its config.toml, or name an '
            'interpreter by its absolute path'
        )
    if env.command is None:
        assert env.python is not None
        return [interpreter_of(env.python, f'environment {name!r}')]
    python = env.python or 'python3'
    words = shlex.split(env.command)
    image = env.image or ''
    return [w.format(python=python, image=image) for w in words]


def worker_sys_path() -> list[str]:
    """What a worker of another environment adds (at the end) to its ``sys.path``: this
    process's entries that are not its own installation's (its standard library and
    site-packages would shadow the environment's, and the directory of its tether:
    the environment has its own), so functions pickled by reference from the endpoint's
    own modules import there too."""
    import tether

    own = os.path.realpath(os.path.dirname(os.path.dirname(tether.__file__))) + os.sep
    prefixes = {
        os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)
    }
    kept = []
    for entry in sys.path:
        if not entry:
            continue
        real = os.path.realpath(entry) + os.sep
        if real == own or any(real.startswith(p) for p in prefixes):
            continue
        if 'site-packages' in real or 'dist-packages' in real:
            continue
        kept.append(entry)
    return kept


def default_info() -> dict[str, Any]:
    """What the default environment (this interpreter) reads."""
    import tether

    return {
        'python': platform.python_version(),
        'executable': sys.executable,
        'tether': tether.__version__,
        'serializers': ['json', 'pickle', 'source', 'tether'],
    }


def probe(name: str, environments: dict[str, EnvironmentConfig]) -> dict[str, Any]:
    """Run environment ``name``'s interpreter once: its ``python``, ``tether`` and
    ``serializers`` (plus ``executable``), or ``{'error': why}`` when it cannot start or
    cannot import tether (then its workers could not run anything)."""
    if not name:
        return default_info()
    try:
        argv = argv_of(name, environments)
    except ConfigError as e:
        return {'error': str(e)}
    env = {**os.environ, 'TETHER_FAAS_SYS_PATH': json.dumps(worker_sys_path())}
    try:
        code, stdout, stderr = _run_bounded([*argv, '-c', _PROBE], env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {'error': f'environment {name!r} ({shlex.join(argv)}) did not start: {e}'}
    except _ProbeOutputError:
        return {
            'error': f'environment {name!r} ({shlex.join(argv)}) printed more than '
            f'{_PROBE_OUTPUT // 1024} KiB when asked for its versions: it was stopped'
        }
    for line in stdout.splitlines():
        if line.startswith('TETHER-ENVIRONMENT '):
            try:
                info = json.loads(line.split(' ', 1)[1])
            except ValueError:
                break
            if not isinstance(info, dict):  # an interpreter's output: not trusted
                break
            if not info.get('tether'):
                info['error'] = (
                    f'environment {name!r} ({info.get("executable")}) cannot import tether '
                    f'({info.get("tether_error")}): install tether there'
                )
            return info
    tail = (stderr or stdout).strip().splitlines()[-3:]
    return {
        'error': f'environment {name!r} ({shlex.join(argv)}) exited with code '
        f'{code} without reporting its versions: {" / ".join(tail)}'
    }


class _ProbeOutputError(Exception):
    """A probe printed more than :data:`_PROBE_OUTPUT` bytes."""


def _run_bounded(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run ``argv`` to its end: its exit code, stdout and stderr (an interpreter's output:
    at most :data:`_PROBE_OUTPUT` bytes of both, within :data:`_PROBE_TIMEOUT`).

    Raises:
        OSError: it cannot start.
        subprocess.TimeoutExpired: it ran too long (it is killed).
        _ProbeOutputError: it printed too much (it is killed).
    """
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert process.stdout is not None
    assert process.stderr is not None
    deadline = time.monotonic() + _PROBE_TIMEOUT
    out = {process.stdout: bytearray(), process.stderr: bytearray()}
    with process, selectors.DefaultSelector() as selector:
        for stream in out:
            selector.register(stream, selectors.EVENT_READ)
        try:
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired(argv, _PROBE_TIMEOUT)
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fileobj)
                        continue
                    out[key.fileobj].extend(chunk)  # type: ignore[index]
                    if sum(map(len, out.values())) > _PROBE_OUTPUT:
                        raise _ProbeOutputError
            code = process.wait(max(0.0, deadline - time.monotonic()))
        except BaseException:
            process.kill()
            raise
    stdout, stderr = (bytes(b).decode(errors='replace') for b in out.values())
    return code, stdout, stderr


# Engines whose workers run on the agent's host with the agent's interpreter (or, for
# another environment, the interpreter it names): their environments can be checked here.
_LOCAL_ENGINES = ('managers', 'process')


class Environments:
    """An agent's environments: what each reported, and the environment of a function.

    The default environment (``''``) is described by this interpreter for the engines
    whose workers use it (``process``, ``managers``); with another engine (Parsl's
    workers may run elsewhere) it is not checked, and other environments are refused.
    """

    def __init__(self, environments: dict[str, EnvironmentConfig], engine: str) -> None:
        self.environments = environments
        self.engine = engine
        self.local = engine in _LOCAL_ENGINES
        self.infos: dict[str, dict[str, Any]] = {}
        # Interpreters named by path being probed now (each holds a place among
        # MAX_ENVIRONMENTS until its probe ends), and the lock over both.
        self._probing: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def probe_declared(self) -> None:
        """Probe the default and every declared environment (blocking: at start)."""
        if not self.local:
            return
        self.infos[''] = default_info()
        for name in self.environments:
            self.infos[name] = probe(name, self.environments)

    def summary(self) -> dict[str, dict[str, Any]]:
        """What each environment reported (``default`` for ``''``), for the service."""
        keys = ('python', 'tether', 'serializers', 'error')
        summary = {}
        for name, info in self.infos.items():
            entry = {k: info[k] for k in keys if k in info}
            if 'error' in entry:  # an interpreter's output: kept short
                entry['error'] = str(entry['error'])[:_MAX_ERROR]
            summary[name or DEFAULT] = entry
        return summary

    def key_of(self, meta: dict[str, Any]) -> str:
        """The environment a function's envelope asks for (``''``: the default).

        Raises:
            ConfigError: a name this endpoint does not declare, or an engine that runs
                every function in its own environment.
        """
        name = check_environment_name(meta.get('environment')) or ''
        if not name:
            return ''
        if not self.local:
            raise ConfigError(
                f"the {self.engine!r} engine runs functions in its workers' own "
                f'environment only: environment {name!r} needs engine "process" or '
                '"managers"'
            )
        if not name.startswith('/'):
            argv_of(name, self.environments)  # unknown name: ConfigError
        return name

    def must_probe(self, key: str) -> bool:
        """True if ``key`` (an interpreter named by path) was never probed."""
        return bool(key) and key not in self.infos

    def probe_path(self, key: str) -> None:
        """Probe an interpreter a function named by its path (blocking; safe from several
        threads: one probe per path, the others wait for it).

        Raises:
            ConfigError: this endpoint runs, or is probing, :data:`MAX_ENVIRONMENTS`
                environments already (the default one not counted).
        """
        with self._lock:
            if key in self.infos:
                return
            probing = self._probing.get(key)
            if probing is None:
                taken = sum(1 for k in self.infos if k) + len(self._probing)
                if taken >= MAX_ENVIRONMENTS:
                    raise ConfigError(
                        f'this endpoint runs {MAX_ENVIRONMENTS} environments already: '
                        f'declare {key!r} in its [environments] table, or use one of those'
                    )
                probing = self._probing[key] = threading.Event()
                ours = True
            else:
                ours = False
        if not ours:
            probing.wait()
            if key not in self.infos:
                raise ConfigError(f'environment {key!r} could not be probed')
            return
        try:
            info = probe(key, self.environments)
            with self._lock:
                self.infos[key] = info
        finally:
            with self._lock:
                del self._probing[key]
            probing.set()

    def check(self, meta: dict[str, Any], key: str) -> None:
        """Raise if environment ``key`` cannot read a function with ``meta``.

        Raises:
            VersionMismatch: its Python or tether cannot read the function.
            ConfigError: it cannot start, or lacks the function's serializer.
        """
        info = self.infos.get(key)
        if info is None:
            return  # the default environment of a remote engine: not known here
        check_readable(meta, info, f'environment {key or DEFAULT!r}')

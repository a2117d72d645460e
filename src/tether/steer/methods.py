"""Task methods: :class:`PythonMethod`, :class:`PythonGeneratorMethod` and
:class:`ExecutableMethod` (a program, with pre and post steps).

A task server takes plain functions too; these classes give a method a name other than
its function's, and are Colmena's. Each is called like its function by the task server;
called with a :class:`~tether.steer.models.Result` alone, it runs that request as a
worker does and returns it with its value (or failure) set, packed.
"""

from __future__ import annotations

import copy
import inspect
import os
import pathlib
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from tether.exceptions import ConfigError, ExecutableMethodError
from tether.steer.models import ResourceRequirements, Result

__all__ = ['ColmenaMethod', 'ExecutableMethod', 'PythonGeneratorMethod', 'PythonMethod']


def _declares(function: Callable[..., Any], name: str) -> bool:
    try:
        return name in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


class ColmenaMethod:
    """A named task method: subclasses define :meth:`function`.

    Calling the method with arguments calls :meth:`function`; calling it with one
    :class:`~tether.steer.models.Result` and nothing else runs that request (unpack the
    inputs, run, record the value or the failure and the timings, pack the value) and
    returns it.
    """

    name: str
    wants_resources = False
    wants_result = False

    @property
    def __name__(self) -> str:
        return self.name

    def function(self, *args: Any, **kwargs: Any) -> Any:
        """The work itself."""
        raise NotImplementedError

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], Result):
            from tether.steer.task_server._worker import run_task

            return run_task(self.function, args[0], self)
        return self.function(*args, **kwargs)


class _FunctionMethod(ColmenaMethod):
    """A task method that wraps a function, named ``name`` (default: its ``__name__``)."""

    def __init__(self, function: Callable[..., Any], name: str | None = None) -> None:
        if not callable(function):
            raise ConfigError(f'{type(self).__name__} needs a callable, not {function!r}')
        self._function = function
        self.name = name or function.__name__

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self._function!r}, name={self.name!r})'


class PythonMethod(_FunctionMethod):
    """A Python function as a task method, named ``name`` (default: its ``__name__``)."""

    def __init__(self, function: Callable[..., Any], name: str | None = None) -> None:
        super().__init__(function, name)
        # A function that declares ``_resources`` gets the task's (as in Colmena).
        self.wants_resources = _declares(function, '_resources')

    def function(self, *args: Any, **kwargs: Any) -> Any:
        return self._function(*args, **kwargs)


class PythonGeneratorMethod(_FunctionMethod):
    """A generator function as a task method.

    Without ``streaming_queue`` the task's value is the list of what it yielded (with
    ``store_return_value=True``: ``[yielded, returned]``). With ``streaming_queue``,
    each yielded item is sent at once to the task's topic as an intermediate result
    (``complete=False``), and the final result's value is what the generator returned
    (``None`` unless ``store_return_value``).
    """

    wants_result = True

    def __init__(
        self,
        function: Callable[..., Any],
        name: str | None = None,
        store_return_value: bool = False,
        streaming_queue: Any = None,
    ) -> None:
        super().__init__(function, name)
        self.store_return_value = store_return_value
        self.streaming_queue = streaming_queue

    def _stream(self, item: Any, result: Result, start: float) -> None:
        partial = copy.deepcopy(result)
        partial.set_result(item, time.perf_counter() - start, intermediate=True)
        self.streaming_queue.deliver_result(partial)

    def function(self, *args: Any, _result: Result | None = None, **kwargs: Any) -> Any:
        gen = self._function(*args, **kwargs)
        items: list[Any] = []
        start = time.perf_counter()
        while True:
            try:
                item = next(gen)
            except StopIteration as stop:
                returned = stop.value
                break
            if self.streaming_queue is not None and _result is not None:
                self._stream(item, _result, start)
            else:
                items.append(item)
        if self.streaming_queue is not None and _result is not None:
            return returned if self.store_return_value else None
        return [items, returned] if self.store_return_value else items


class ExecutableMethod(ColmenaMethod):
    """A task method that runs an executable in a fresh directory.

    Subclass it and override :meth:`preprocess` (write input files, return extra
    command-line arguments and standard input) and :meth:`postprocess` (read the outputs
    and return the task's value). The program runs without a shell, as a list of
    arguments, in a new temporary directory that is removed after ``postprocess``; its
    standard output and error are saved there as ``stdout.txt`` and ``stderr.txt`` (also
    linked as Colmena's ``colmena.stdout`` and ``colmena.stderr``).

    Args:
        executable: The command, as a list of arguments.
        name: The method's name (what ``send_inputs(method=...)`` uses); by default the
            program's name (``executable[0]``), as in Colmena.
        mpi: Whether to prefix the command with ``mpi_command_string``.
        mpi_command_string: The launcher, formatted with the task's resources, for example
            ``'mpiexec -n {total_ranks}'``.
    """

    wants_resources = True
    wants_result = True

    def __init__(
        self,
        executable: Sequence[str],
        name: str | None = None,
        mpi: bool = False,
        mpi_command_string: str | None = None,
    ) -> None:
        if isinstance(executable, str) or not executable:
            raise ConfigError('executable must be a non-empty list of arguments, not a string')
        if mpi and not mpi_command_string:
            raise ConfigError(
                'mpi=True needs mpi_command_string (e.g. "mpiexec -n {total_ranks}")'
            )
        self.executable = list(executable)
        self.name = name or pathlib.PurePath(self.executable[0]).name
        self.mpi = mpi
        self.mpi_command_string = mpi_command_string

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.executable!r}, name={self.name!r})'

    def preprocess(
        self,
        run_dir: pathlib.Path,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> tuple[list[str], str | None]:
        """Prepare ``run_dir``; return extra arguments and standard input (default none)."""
        return [], None

    def postprocess(self, run_dir: pathlib.Path) -> Any:
        """Return the task's value from the outputs in ``run_dir`` (default: stdout)."""
        return (run_dir / 'stdout.txt').read_text()

    def render_mpi_launch(self, resources: ResourceRequirements) -> str:
        """The MPI launcher's command line for ``resources``, as Colmena renders it.

        A string; it is split with :func:`shlex.split` and run without a shell (a
        subclass may override this and return its own line).
        """
        assert self.mpi_command_string is not None
        return self.mpi_command_string.format(
            node_count=resources.node_count,
            total_ranks=resources.total_ranks,
            cpu_processes=resources.cpu_processes,
            cpu_threads=resources.cpu_threads,
        )

    def function(
        self,
        *args: Any,
        _resources: ResourceRequirements | None = None,
        _result: Result | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run the program for these arguments and return :meth:`postprocess`'s value.

        Run for a task, the seconds of each step go to the result's
        ``time.additional`` as ``exec_preprocess``, ``exec_execution`` and
        ``exec_postprocess`` (Colmena's names).
        """
        timings = _result.time.additional if _result is not None else {}
        run_dir = pathlib.Path(tempfile.mkdtemp(prefix=f'steer-{self.name}-'))
        try:
            start = time.perf_counter()
            extra, stdin = self.preprocess(run_dir, args, kwargs)
            timings['exec_preprocess'] = time.perf_counter() - start
            command = [*self.executable, *map(str, extra)]
            if self.mpi:
                launch = self.render_mpi_launch(_resources or ResourceRequirements())
                command = [*shlex.split(launch), *command]
            start = time.perf_counter()
            try:
                proc = subprocess.run(
                    command,
                    input=stdin,
                    cwd=run_dir,
                    capture_output=True,
                    text=True,
                    check=False,
                )
            except OSError as e:
                raise ExecutableMethodError(
                    f'method {self.name}: cannot run {command!r}: {e}'
                ) from e
            timings['exec_execution'] = time.perf_counter() - start
            (run_dir / 'stdout.txt').write_text(proc.stdout)
            (run_dir / 'stderr.txt').write_text(proc.stderr)
            # The same files under Colmena's names, for postprocess steps written for it.
            os.link(run_dir / 'stdout.txt', run_dir / 'colmena.stdout')
            os.link(run_dir / 'stderr.txt', run_dir / 'colmena.stderr')
            if proc.returncode != 0:
                raise ExecutableMethodError(
                    f'method {self.name}: {command!r} exited with status {proc.returncode}; '
                    f'its standard error ends with: {proc.stderr[-2000:]!r}',
                )
            start = time.perf_counter()
            value = self.postprocess(run_dir)
            timings['exec_postprocess'] = time.perf_counter() - start
            return value
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)

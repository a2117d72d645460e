"""Methods that run a program: :class:`ExecutableMethod`, with pre and post steps."""

from __future__ import annotations

import pathlib
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from typing import Any

from tether.exceptions import ConfigError, ExecutableMethodError
from tether.steer.models import ResourceRequirements

__all__ = ['ExecutableMethod']


class ExecutableMethod:
    """A task method that runs an executable in a fresh directory.

    Subclass it and override :meth:`preprocess` (write input files, return extra
    command-line arguments and standard input) and :meth:`postprocess` (read the outputs
    and return the task's value). The program runs without a shell, as a list of
    arguments, in a new temporary directory that is removed after ``postprocess``; its
    standard output and error are saved there as ``stdout.txt`` and ``stderr.txt``.

    Args:
        executable: The command, as a list of arguments.
        name: The method's name (what ``send_inputs(method=...)`` uses).
        mpi: Whether to prefix the command with ``mpi_command_string``.
        mpi_command_string: The launcher, formatted with the task's resources, for example
            ``'mpiexec -n {total_ranks}'``.
    """

    wants_resources = True

    def __init__(
        self,
        executable: Sequence[str],
        name: str,
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
        self.name = name
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

    def render_mpi_launch(self, resources: ResourceRequirements) -> list[str]:
        """The MPI launcher's arguments for ``resources``."""
        assert self.mpi_command_string is not None
        text = self.mpi_command_string.format(
            node_count=resources.node_count,
            total_ranks=resources.total_ranks,
            cpu_processes=resources.cpu_processes,
            cpu_threads=resources.cpu_threads,
        )
        return shlex.split(text)

    def __call__(
        self,
        *args: Any,
        _resources: ResourceRequirements | None = None,
        **kwargs: Any,
    ) -> Any:
        run_dir = pathlib.Path(tempfile.mkdtemp(prefix=f'steer-{self.name}-'))
        try:
            extra, stdin = self.preprocess(run_dir, args, kwargs)
            command = [*self.executable, *map(str, extra)]
            if self.mpi:
                command = [*self.render_mpi_launch(_resources or ResourceRequirements()), *command]
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
            (run_dir / 'stdout.txt').write_text(proc.stdout)
            (run_dir / 'stderr.txt').write_text(proc.stderr)
            if proc.returncode != 0:
                raise ExecutableMethodError(
                    f'method {self.name}: {command!r} exited with status {proc.returncode}; '
                    f'its standard error ends with: {proc.stderr[-2000:]!r}',
                )
            return self.postprocess(run_dir)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)

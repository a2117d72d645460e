"""Shell commands as functions: :class:`ShellFunction`, :class:`MPIFunction`, :class:`ShellResult`.

A ``ShellFunction`` is an ordinary callable object: registered and submitted like any
function, it runs on one of the endpoint's workers, where calling it runs its command
with ``/bin/sh`` and returns a :class:`ShellResult` with the command's return code and
the last lines of its standard output and standard error. Keyword arguments of the call
fill the command's ``{placeholders}`` (``str.format``). A non-zero return code is a
result, not an error: look at ``returncode``.

A call runs its command in ``run_dir`` (default: ``$TETHER_FAAS_TASK_DIR`` if set, else
the worker's directory), created if missing; relative ``stdout``/``stderr`` paths are
under it. The worker's own directory is never changed.
"""

from __future__ import annotations

import dataclasses
import keyword
import os
import subprocess
import tempfile
from typing import Any

__all__ = ['MPIFunction', 'ShellFunction', 'ShellResult']

#: Environment variable naming the directory tasks' commands run in (``run_dir``).
TASK_DIR_ENV = 'TETHER_FAAS_TASK_DIR'

#: Return code of a command stopped at its ``walltime`` (as GNU ``timeout`` answers).
WALLTIME_RETURNCODE = 124


def _tail(text: str, lines: int) -> str:
    return '\n'.join(text.splitlines()[-lines:]) if lines > 0 else ''


def _summary(text: str, head: bool) -> tuple[str, bool]:
    """At most 10 lines and 1024 characters of ``text`` (its start or its end)."""
    part = text.strip()
    part = part[:1024] if head else part[-1024:]
    rows = part.splitlines()
    rows = rows[:10] if head else rows[-10:]
    short = '\n'.join(rows)
    return short, short != text


@dataclasses.dataclass
class ShellResult:
    """What a :class:`ShellFunction` call did.

    Attributes:
        cmd: The command as run (placeholders filled).
        stdout: The last ``snippet_lines`` lines of its standard output.
        stderr: The last ``snippet_lines`` lines of its standard error.
        returncode: Its exit status (``124``: stopped at its ``walltime``).
        exception_name: The name of the exception that stopped it, if one did
            (``'subprocess.TimeoutExpired'`` past its walltime).
    """

    cmd: str
    stdout: str
    stderr: str
    returncode: int
    exception_name: str | None = None

    def __str__(self) -> str:
        out, cut = _summary(self.stdout, head=False)
        text = f'exit code: {self.returncode}\n   stdout:\n{out}'
        if cut:
            text += '\n(truncated; see .stdout for the rest)'
        if self.returncode != 0:
            err, cut = _summary(self.stderr, head=False)
            text += f'\n\n   stderr:\n{err}'
            if cut:
                text += '\n(truncated; see .stderr for the rest)'
            if self.exception_name:
                text += f'\n\nexception: {self.exception_name}'
        return text


class ShellFunction:
    """A shell command to run on an endpoint's workers.

    Args:
        cmd: The command (a ``/bin/sh`` script); ``{name}`` placeholders are filled with
            the call's keyword arguments.
        stdout: A file (on the endpoint) to append the command's standard output to.
            Default: a temporary file, removed after the call.
        stderr: The same for standard error.
        walltime: Seconds the command may run; past them it is killed and the result's
            ``returncode`` is 124.
        snippet_lines: How many of the last lines of output the result carries.
        name: The function's name (``__name__``; a Python identifier, not a keyword);
            default: the class name.
        run_dir: The directory the command runs in (created if missing); default:
            ``$TETHER_FAAS_TASK_DIR`` at call time, else the worker's directory.
        return_dict: Return the result as a plain dict (JSON-friendly) instead of a
            :class:`ShellResult`.

    Raises:
        tether.exceptions.WalltimeError: a negative ``walltime`` (a ``ValueError``, and
            an ``AssertionError`` as in the Globus Compute SDK).
        ValueError: an invalid ``name``.
    """

    def __init__(  # noqa: PLR0917 (the SDK's positional order)
        self,
        cmd: str,
        stdout: str | os.PathLike[str] | None = None,
        stderr: str | os.PathLike[str] | None = None,
        walltime: float | None = None,
        snippet_lines: int = 1000,
        name: str | None = None,
        *,
        run_dir: str | os.PathLike[str] | None = None,
        return_dict: bool = False,
    ) -> None:
        if not isinstance(cmd, str):
            raise TypeError(f'cmd must be a string, not {type(cmd).__name__}')
        if walltime is not None and (isinstance(walltime, bool) or not walltime >= 0):
            from tether.exceptions import WalltimeError

            raise WalltimeError(f'walltime must be a number of seconds >= 0, not {walltime!r}')
        self.cmd = cmd
        self.stdout = None if stdout is None else os.fspath(stdout)
        self.stderr = None if stderr is None else os.fspath(stderr)
        self.walltime = walltime
        self.snippet_lines = snippet_lines
        if name is not None and (not name.isidentifier() or keyword.iskeyword(name)):
            raise ValueError(f'name must be a Python identifier (not a keyword), not {name!r}')
        self.__name__ = name or type(self).__name__
        self.run_dir = None if run_dir is None else os.fspath(run_dir)
        self.return_dict = return_dict

    def __repr__(self) -> str:
        fields = ', '.join(
            f'{k}={getattr(self, k)!r}'
            for k in ('cmd', 'stdout', 'stderr', 'walltime', 'snippet_lines')
        )
        return f'{type(self).__name__}({fields}, name={self.__name__!r})'

    def __str__(self) -> str:
        cmd, cut = _summary(self.cmd, head=True)
        rows = [self.__name__]
        if self.walltime is not None:
            rows.append(f' wall time: {self.walltime}')
        if self.stdout is not None:
            rows.append(f'    stdout: {self.stdout!r}')
        if self.stderr is not None:
            rows.append(f'    stderr: {self.stderr!r}')
        rows.append(f'     lines: {self.snippet_lines}')
        if '\n' in cmd:
            indent = '\n' + ' ' * len('   command: ')
            rows.append('   command: -----' + indent + cmd.replace('\n', indent))
        else:
            rows.append(f'   command: {cmd}')
        if cut:
            rows.append('(truncated; see .cmd for full script)')
        return '\n'.join(rows)

    def command(self, **kwargs: Any) -> str:
        """The command to run for a call with ``kwargs``."""
        return self.cmd.format(**kwargs)

    def __call__(self, **kwargs: Any) -> ShellResult | dict[str, Any]:
        result = self.run(**kwargs)
        return dataclasses.asdict(result) if self.return_dict else result

    def run(self, **kwargs: Any) -> ShellResult:
        """Run the command for a call with ``kwargs``; its :class:`ShellResult`.

        Raises:
            OSError: the run directory cannot be created.
        """
        cmd = self.command(**kwargs)
        run_dir = self.run_dir or os.environ.get(TASK_DIR_ENV) or None
        if run_dir is not None:
            os.makedirs(run_dir, exist_ok=True)
        with (
            _Output(_under(run_dir, self.stdout)) as (out, out_start),
            _Output(_under(run_dir, self.stderr)) as (err, err_start),
        ):
            exception_name = None
            proc = subprocess.Popen(cmd, shell=True, stdout=out, stderr=err, cwd=run_dir)
            try:
                returncode = proc.wait(timeout=self.walltime)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                returncode, exception_name = WALLTIME_RETURNCODE, 'subprocess.TimeoutExpired'
            return ShellResult(
                cmd,
                _tail(_read_from(out, out_start), self.snippet_lines),
                _tail(_read_from(err, err_start), self.snippet_lines),
                returncode,
                exception_name,
            )


class MPIFunction(ShellFunction):
    """A :class:`ShellFunction` whose command is started by the worker's MPI launcher.

    The command runs as ``$PARSL_MPI_PREFIX <cmd>``: on an endpoint whose engine runs
    Parsl in MPI mode the prefix is the launcher line for the task's
    ``resource_specification`` (``mpiexec -n ...``); where the worker's environment
    sets no prefix, the command runs once, as a :class:`ShellFunction`.
    """

    def command(self, **kwargs: Any) -> str:
        return '$PARSL_MPI_PREFIX ' + super().command(**kwargs)


class _Output:
    """A file for one output stream: the named one (appended to) or a temporary one."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.file: Any = None

    def __enter__(self) -> tuple[Any, int]:
        if self.path is None:
            self.file = tempfile.TemporaryFile('w+b')
        else:
            self.file = open(self.path, 'a+b')
        self.file.seek(0, os.SEEK_END)
        return self.file, self.file.tell()

    def __exit__(self, *exc: object) -> None:
        self.file.close()


def _under(run_dir: str | None, path: str | None) -> str | None:
    if path is None or run_dir is None:
        return path
    return os.path.join(run_dir, path)  # an absolute path stays as it is


def _read_from(file: Any, start: int) -> str:
    file.flush()
    file.seek(start)
    return str(file.read().decode(errors='replace'))

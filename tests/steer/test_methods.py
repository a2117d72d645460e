"""Executable methods: a program run with pre and post steps, through a task server."""

from __future__ import annotations

import pathlib
import sys
from typing import Any

import pytest

from tether.exceptions import ConfigError, ExecutableMethodError
from tether.steer import ExecutableMethod, LocalTaskServer, PipeQueues, ResourceRequirements
from tether.testing.steer import serving

SUM = 'import sys; print(sum(float(a) for a in sys.argv[1:]) + float(open("k").read()))'


class Summer(ExecutableMethod):
    """Sum its arguments and a constant written to a file by the pre step."""

    def __init__(self) -> None:
        super().__init__([sys.executable, '-c', SUM], name='summer')

    def preprocess(
        self,
        run_dir: pathlib.Path,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> tuple[list[str], str | None]:
        (run_dir / 'k').write_text(str(kwargs.get('k', 0)))
        return [str(a) for a in args], None

    def postprocess(self, run_dir: pathlib.Path) -> float:
        return float((run_dir / 'stdout.txt').read_text())


class Failing(ExecutableMethod):
    def __init__(self) -> None:
        super().__init__([sys.executable, '-c', 'import sys; sys.exit("no luck")'], name='bad')


def test_executable_method_through_a_task_server() -> None:
    queues = PipeQueues()
    with serving(LocalTaskServer(queues, [Summer(), Failing()], num_workers=1)):
        queues.send_inputs(1, 2, method='summer', input_kwargs={'k': 10})
        ok = queues.get_result(timeout=60)
        queues.send_inputs(method='bad')
        bad = queues.get_result(timeout=60)
    assert ok.value == 13.0, ok.failure_info
    assert not bad.success
    assert bad.failure_info is not None
    assert 'ExecutableMethodError' in bad.failure_info.exception
    assert 'no luck' in bad.failure_info.exception


def test_mpi_launch_and_bad_definitions() -> None:
    method = ExecutableMethod(
        ['app'], 'app', mpi=True, mpi_command_string='mpiexec -n {total_ranks}'
    )
    resources = ResourceRequirements(node_count=2, cpu_processes=4)
    assert method.render_mpi_launch(resources) == 'mpiexec -n 8'  # a line, as Colmena's
    with pytest.raises(ConfigError):
        ExecutableMethod('rm -rf /', 'x')
    with pytest.raises(ConfigError):
        ExecutableMethod(['app'], 'x', mpi=True)
    with pytest.raises(ExecutableMethodError, match='cannot run'):
        ExecutableMethod(['/nonexistent/program'], 'x')()


def test_mpi_launch_line_is_split_and_run_without_a_shell() -> None:
    # The launcher here is `echo`: the value shows the command that was run, word by word.
    method = ExecutableMethod(
        ['echo', 'app'],
        mpi=True,
        mpi_command_string="echo -N {total_ranks} 'a b' $HOME;",
    )
    resources = ResourceRequirements(node_count=2, cpu_processes=3)
    line = method.render_mpi_launch(resources)
    assert line == "echo -N 6 'a b' $HOME;"
    # No shell: the quotes group words, `$HOME` and `;` are passed as they are.
    assert method(_resources=resources) == '-N 6 a b $HOME; echo app\n'

"""A private single-node Slurm cluster whose daemons live in one network namespace.

The machine's Slurm cluster (``scripts/services.sh``) runs its jobs in the host's network
namespace. A cluster of this module runs ``slurmctld`` and ``slurmd`` inside a given
namespace (a site of :class:`tests.endpoint._topology.Topology`), listening on that
namespace's address, so its jobs run there too: they reach what the site reaches (its
tether endpoint, its faas endpoint's interchange) and nothing else. Everything of it is
under one folder (configuration, state, spool, pid and log files); the host's ``munged``
authenticates for it (its socket is a file, which every network namespace sees).

Client commands (``sbatch``, ``squeue``, ``scancel``: what Parsl's ``SlurmProvider``
runs) use it when ``SLURM_CONF`` names its configuration (:meth:`NetnsSlurm.env`) and
they run inside the namespace. The daemons are entered into the namespace with
``nsenter --net`` rather than ``ip netns exec``: the latter mounts a fresh ``/sys``
without ``/sys/fs/cgroup``, and Debian's slurmd 22.05 refuses to start then ("No
filesystem mounted on /sys/fs/cgroup", even with ``proctrack/linuxproc`` and
``task/none``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

from tether.testing import wait_until

__all__ = ['NetnsSlurm']

SLURMCTLD = '/usr/sbin/slurmctld'
SLURMD = '/usr/sbin/slurmd'


class NetnsSlurm:
    """One-node Slurm cluster ``name`` in network namespace ``netns`` at ``address``.

    Args:
        folder: A folder of its own (created; removed by :meth:`stop`).
        netns: The network namespace (``ip netns`` name) its daemons and jobs live in.
        address: The namespace's address the daemons listen on.
        name: Its ClusterName (and the node's name).
        cpus: CPUs of its node (default: this machine's).
    """

    def __init__(
        self,
        folder: Path,
        netns: str,
        address: str,
        *,
        name: str = 'site-a',
        cpus: int | None = None,
    ) -> None:
        self.folder = folder
        self.netns = netns
        self.address = address
        self.name = name
        self.node = name
        self.cpus = cpus or os.cpu_count() or 1
        self.conf = folder / 'slurm.conf'
        self._daemons: list[subprocess.Popen[bytes]] = []

    def config_text(self) -> str:
        """Its ``slurm.conf``: the host cluster's settings (no cgroups), its own ports,
        names and files."""
        host = socket.gethostname().split('.')[0]
        f = self.folder
        return (
            f'# A private test cluster in network namespace {self.netns} (tests/_slurm_netns.py)\n'
            f'ClusterName={self.name}\n'
            f'SlurmctldHost={host}({self.address})\n'
            'SlurmctldPort=6917\n'
            'SlurmdPort=6918\n'
            'SlurmUser=root\n'
            'SlurmdUser=root\n'
            'AuthType=auth/munge\n'
            'ProctrackType=proctrack/linuxproc\n'
            'TaskPlugin=task/none\n'
            'SchedulerType=sched/backfill\n'
            'SelectType=select/cons_tres\n'
            'SelectTypeParameters=CR_Core\n'
            f'StateSaveLocation={f / "state"}\n'
            f'SlurmdSpoolDir={f / "spool"}\n'
            f'SlurmctldPidFile={f / "slurmctld.pid"}\n'
            f'SlurmdPidFile={f / "slurmd.pid"}\n'
            f'SlurmctldLogFile={f / "slurmctld.log"}\n'
            f'SlurmdLogFile={f / "slurmd.log"}\n'
            'ReturnToService=2\n'
            'MpiDefault=none\n'
            'JobAcctGatherType=jobacct_gather/none\n'
            'KillWait=2\n'
            'MinJobAge=600\n'
            f'NodeName={self.node} NodeHostname={host} NodeAddr={self.address} '
            f'CPUs={self.cpus} RealMemory=1024 State=UNKNOWN\n'
            f'PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP\n'
        )

    def env(self) -> dict[str, str]:
        """What a process at the site needs in its environment to use this cluster."""
        return {'SLURM_CONF': str(self.conf)}

    # Starting --------------------------------------------------------------------------

    def start(self, timeout: float = 60) -> NetnsSlurm:
        """Start both daemons and wait until the node is idle (stops them on failure)."""
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout: float) -> None:
        for tool in (SLURMCTLD, SLURMD, 'nsenter', 'sinfo'):
            if shutil.which(tool) is None:
                raise RuntimeError(f'{tool} is missing: run scripts/services.sh')
        if not Path('/run/munge/munge.socket.2').exists():
            raise RuntimeError('munged is not running: run scripts/services.sh')
        for sub in ('state', 'spool'):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(self.config_text())
        enter = ['nsenter', f'--net=/run/netns/{self.netns}']
        self._daemon([*enter, SLURMCTLD, '-D', '-f', str(self.conf)], 'slurmctld')
        self._daemon([*enter, SLURMD, '-D', '-f', str(self.conf), '-N', self.node], 'slurmd')

        def ready() -> bool:
            for name, proc in zip(('slurmctld', 'slurmd'), self._daemons, strict=True):
                if proc.poll() is not None:
                    raise RuntimeError(f'{name} exited ({proc.returncode}): {self.logs()}')
            states = self.run('sinfo', '-h', '-o', '%t', check=False).stdout.split()
            return bool(states) and states[0].rstrip('*~#') in ('idle', 'mix', 'alloc')

        try:
            wait_until(ready, timeout=timeout, interval=0.1, message=f'the node of {self.name}')
        except AssertionError as exc:
            raise RuntimeError(f'{exc}: {self.logs()}') from None

    def _daemon(self, cmd: list[str], name: str) -> None:
        with open(self.folder / f'{name}.out', 'ab') as out:
            self._daemons.append(subprocess.Popen(cmd, stdout=out, stderr=out))

    def logs(self) -> str:
        """The ends of the daemons' logs (for an error message)."""
        parts = []
        for name in ('slurmctld.log', 'slurmd.log', 'slurmctld.out', 'slurmd.out'):
            path = self.folder / name
            if path.exists():
                parts.append(f'--- {name}\n{path.read_text(errors="replace")[-1500:]}')
        return '\n'.join(parts)

    # Using -----------------------------------------------------------------------------

    def run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A client command (``squeue``, ``scontrol`` ...) against this cluster."""
        out = subprocess.run(
            ['ip', 'netns', 'exec', self.netns, *cmd],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env={**os.environ, **self.env()},
        )
        if check and out.returncode != 0:
            raise RuntimeError(f'{" ".join(cmd)} ({self.name}) failed: {out.stderr.strip()}')
        return out

    def jobs(self) -> dict[str, dict[str, str]]:
        """Every job it knows (finished ones for ``MinJobAge``): id -> state, name,
        node list."""
        out = self.run('squeue', '-h', '--states=all', '-o', '%i|%T|%j|%N').stdout
        found: dict[str, dict[str, Any]] = {}
        for line in out.splitlines():
            job, state, name, nodes = line.split('|')
            found[job] = {'state': state, 'name': name, 'nodes': nodes}
        return found

    # Stopping --------------------------------------------------------------------------

    def stop(self, timeout: float = 30) -> None:
        """Cancel its jobs, stop its daemons, kill what its jobs left, remove its folder.
        Safe to call on any exit path, and more than once."""
        if any(p.poll() is None for p in self._daemons):
            with contextlib.suppress(Exception):
                self._cancel_jobs(timeout)
        for proc in self._daemons:
            if proc.poll() is None:
                proc.terminate()
        for proc in self._daemons:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        self._daemons.clear()
        self._kill_steps()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _cancel_jobs(self, timeout: float) -> None:
        live = ('PENDING', 'RUNNING', 'COMPLETING', 'CONFIGURING', 'SUSPENDED')

        def cancelled() -> bool:
            left = [j for j, v in self.jobs().items() if v['state'] in live]
            if left:
                self.run('scancel', *left, check=False)
            return not left

        # Best effort: what is still live after the timeout dies with the daemons.
        with contextlib.suppress(AssertionError):
            wait_until(cancelled, timeout=timeout, interval=0.2, message='jobs cancelled')

    def _kill_steps(self) -> None:
        """Kill the ``slurmstepd`` processes left in the namespace (a job's steps outlive
        a stopped slurmd); they are this cluster's: the namespace is its only one."""
        pids = subprocess.run(
            ['ip', 'netns', 'pids', self.netns], capture_output=True, text=True, check=False
        ).stdout.split()
        for pid in pids:
            with contextlib.suppress(OSError, ValueError):
                if Path(f'/proc/{pid}/cmdline').read_bytes().startswith(b'slurmstepd'):
                    os.kill(int(pid), signal.SIGKILL)

    def __enter__(self) -> NetnsSlurm:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

"""An active-learning campaign steered by a tether.steer Thinker.

The "simulation" is a real (if cheap) one: the range of a projectile with quadratic air
drag, integrated step by step, as a function of its launch angle and speed. The
campaign wants the longest range within a fixed budget of simulations. A Gaussian-process
surrogate (scikit-learn) is retrained as results arrive, as a task of its own, and the
Thinker reorders the simulations still to run by the surrogate's upper confidence bound.

    python examples/steer_active_learning.py --simulations 64 --workers 2 --plot al.png

Options: ``--redis HOST:PORT`` runs the queues through Redis (with a store that sends
the surrogate, when it is big, by proxy); otherwise they are pipes on this machine.
It prints a JSON summary and writes a plot of the campaign's progress.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time
import uuid
from typing import Any

import numpy as np

from tether.steer import (
    BaseThinker,
    LocalTaskServer,
    PipeQueues,
    RedisQueues,
    ResourceCounter,
    Result,
    agent,
    result_processor,
    task_submitter,
)

# The tasks ---------------------------------------------------------------------------


def simulate(angle: float, speed: float, dt: float = 1e-3) -> float:
    """Range (m) of a 1 kg ball launched at ``angle`` degrees and ``speed`` m/s in air.

    Drag grows with the square of the speed and thins out with height, so the best angle
    is below 45 degrees and depends on the speed; speed costs energy (a penalty), so the
    best launch is inside the box, not at its edge.
    """
    g, k = 9.81, 0.02
    vx = speed * math.cos(math.radians(angle))
    vy = speed * math.sin(math.radians(angle))
    x = y = 0.0
    while y >= 0.0:
        v = math.hypot(vx, vy)
        drag = k * math.exp(-y / 500.0) * v
        vx -= drag * vx * dt
        vy -= (g + drag * vy) * dt
        x += vx * dt
        y += vy * dt
    return x - 0.004 * speed**2


def train(inputs: list[list[float]], outputs: list[float]) -> Any:
    """Fit a Gaussian-process surrogate of the range on the results so far."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    kernel = ConstantKernel() * RBF(length_scale=[10.0, 10.0]) + WhiteKernel(1e-3)
    model = GaussianProcessRegressor(kernel=kernel, normalize_y=True, random_state=0)
    model.fit(np.asarray(inputs), np.asarray(outputs))
    return model


# The Thinker -------------------------------------------------------------------------


class ActiveLearner(BaseThinker):
    """Keep every worker simulating; retrain and reprioritise every ``retrain_every``."""

    def __init__(
        self,
        queues: Any,
        candidates: np.ndarray,
        *,
        budget: int,
        workers: int,
        retrain_every: int,
        seed: int = 0,
    ) -> None:
        super().__init__(queues, ResourceCounter(workers, ['simulate']))
        self.candidates = candidates
        self.budget = budget
        self.retrain_every = retrain_every
        # Random order until a surrogate exists.
        self.queue = list(np.random.default_rng(seed).permutation(len(candidates)))
        self.lock = threading.Lock()
        self.submitted = 0
        self.inputs: list[list[float]] = []
        self.outputs: list[float] = []
        self.picked_by_model: list[bool] = []
        self.ordered_by_model = False
        self.retrains = 0
        self.start = time.perf_counter()
        self.elapsed: list[float] = []

    @agent(startup=True)
    def allocate(self) -> None:
        self.rec.reallocate(None, 'simulate', 'all')

    @task_submitter(task_type='simulate')
    def submit(self) -> None:
        with self.lock:
            if self.submitted >= self.budget:
                self.rec.release('simulate', 1)
                self.done.wait()
                return
            index = self.queue.pop(0)
            self.submitted += 1
            by_model = self.ordered_by_model
        angle, speed = self.candidates[index]
        self.queues.send_inputs(
            float(angle),
            float(speed),
            method='simulate',
            topic='simulate',
            task_info={'index': int(index), 'by_model': by_model},
        )

    @result_processor(topic='simulate')
    def record(self, result: Result) -> None:
        self.rec.release('simulate', 1)
        if not result.success:
            self.logger.warning('simulation failed: %s', result.failure_info)
            return
        self.inputs.append(list(result.args))
        self.outputs.append(result.value)
        self.picked_by_model.append(result.task_info['by_model'])
        self.elapsed.append(time.perf_counter() - self.start)
        n = len(self.outputs)
        if n % self.retrain_every == 0 and n < self.budget:
            self.queues.send_inputs(self.inputs, self.outputs, method='train', topic='train')
        if n >= self.budget:
            self.done.set()

    @result_processor(topic='train')
    def reprioritise(self, result: Result) -> None:
        if not result.success:
            self.logger.warning('training failed: %s', result.failure_info)
            return
        model = result.value
        with self.lock:
            remaining = np.asarray(self.queue)
            mean, std = model.predict(self.candidates[remaining], return_std=True)
            ucb = mean + 0.5 * std
            self.queue = list(remaining[np.argsort(-ucb)])
            self.ordered_by_model = True
            self.retrains += 1


# The campaign ------------------------------------------------------------------------


def run(
    simulations: int = 64,
    *,
    workers: int = 2,
    retrain_every: int = 8,
    redis: str | None = None,
    plot: str | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Run the campaign; return its summary (and write the plot if asked)."""
    angles, speeds = np.meshgrid(np.linspace(5, 85, 33), np.linspace(10, 120, 34))
    candidates = np.column_stack([angles.ravel(), speeds.ravel()])
    store = None
    if redis is None:
        queues: Any = PipeQueues(topics=['simulate', 'train'])
    else:
        from tether.connectors.redis import RedisConnector
        from tether.store import Store

        host, port = redis.rsplit(':', 1)
        prefix = f'al-{uuid.uuid4().hex}'
        store = Store(prefix, RedisConnector(host, int(port), prefix=prefix), register=True)
        queues = RedisQueues(
            topics=['simulate', 'train'],
            hostname=host,
            port=int(port),
            prefix=prefix,
            proxystore_name={'train': prefix},
            proxystore_threshold={'train': 100_000},
        )
    # Import scikit-learn once, here: the task server's workers are forked from this
    # process and inherit it, instead of each importing it again.
    import sklearn.gaussian_process  # noqa: F401

    server = LocalTaskServer(queues, [simulate, train], num_workers=workers)
    server.start()
    try:
        thinker = ActiveLearner(
            queues,
            candidates,
            budget=simulations,
            workers=workers,
            retrain_every=retrain_every,
            seed=seed,
        )
        thinker.run()
    finally:
        queues.send_kill_signal()
        server.join()
        if store is not None:
            queues.flush()
            queues.close()
            store.close()
    best = np.maximum.accumulate(thinker.outputs)
    pairs = list(zip(thinker.outputs, thinker.picked_by_model, strict=True))
    random_part = [y for y, by_model in pairs if not by_model]
    model_part = [y for y, by_model in pairs if by_model]
    summary = {
        'simulations': len(thinker.outputs),
        'retrains': thinker.retrains,
        'best_range_m': float(best[-1]),
        'best_launch': thinker.inputs[int(np.argmax(thinker.outputs))],
        'mean_range_random_picks': float(np.mean(random_part)) if random_part else None,
        'mean_range_model_picks': float(np.mean(model_part)) if model_part else None,
        'seconds': thinker.elapsed[-1],
    }
    if plot:
        _plot(thinker, best, plot)
        summary['plot'] = plot
    return summary


def _plot(thinker: ActiveLearner, best: np.ndarray, path: str) -> None:
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    n = np.arange(1, len(best) + 1)
    colors = ['tab:orange' if m else 'tab:gray' for m in thinker.picked_by_model]
    left.scatter(n, thinker.outputs, c=colors, s=12, label='simulations (orange: by model)')
    left.plot(n, best, color='tab:blue', label='best so far')
    left.set_xlabel('simulations completed')
    left.set_ylabel('range (m)')
    left.legend(loc='lower right')
    pts = np.asarray(thinker.inputs)
    sc = right.scatter(pts[:, 0], pts[:, 1], c=np.arange(len(pts)), cmap='viridis', s=14)
    right.set_xlabel('launch angle (degrees)')
    right.set_ylabel('launch speed (m/s)')
    fig.colorbar(sc, ax=right, label='order of completion')
    fig.suptitle('Active learning steered by tether.steer')
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--simulations', type=int, default=64)
    parser.add_argument('--workers', type=int, default=2)
    parser.add_argument('--retrain-every', type=int, default=8)
    parser.add_argument('--redis', default=None, help='HOST:PORT (default: pipes)')
    parser.add_argument('--plot', default='steer_active_learning.png')
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args(argv)
    summary = run(
        args.simulations,
        workers=args.workers,
        retrain_every=args.retrain_every,
        redis=args.redis,
        plot=args.plot,
        seed=args.seed,
    )
    json.dump(summary, sys.stdout, indent=2)
    print()
    return 0


if __name__ == '__main__':
    sys.exit(main())

"""Physics simulation: balls dropped on random terrains, simulated with PyBullet.

Each task builds a random heightfield terrain, drops ``ball_count`` balls from random
positions with random velocities, and simulates ``steps`` steps (240 per simulated
second) in PyBullet's ``DIRECT`` (headless) mode. It returns each ball's final position,
speed and the distance it rolled; the client writes them to ``physics.csv``.
PyBullet is imported only in the tasks (``pip install "tether[bench-apps]"``).
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import random
from typing import TYPE_CHECKING, Any

import pydantic

from tether.bench.apps import AppConfig
from tether.bench.apps._common import HoldsNothing, write_csv
from tether.bench.registry import register

if TYPE_CHECKING:
    from tether.bench.engine import Engine

__all__ = ['PhysicsApp', 'PhysicsAppConfig', 'simulate']

logger = logging.getLogger(__name__)


def simulate(
    seed: int,
    ball_count: int,
    steps: int,
    terrain_size: int = 32,
    roughness: float = 0.2,
) -> list[dict[str, float]]:
    """Simulate one random scene; return one dict per ball."""
    import pybullet as pb

    rng = random.Random(seed)
    client = pb.connect(pb.DIRECT)
    try:
        pb.setGravity(0, 0, -9.81, physicsClientId=client)
        heights = [rng.uniform(0, roughness) for _ in range(terrain_size * terrain_size)]
        shape = pb.createCollisionShape(
            pb.GEOM_HEIGHTFIELD,
            meshScale=[0.5, 0.5, 1.0],
            heightfieldData=heights,
            numHeightfieldRows=terrain_size,
            numHeightfieldColumns=terrain_size,
            physicsClientId=client,
        )
        terrain = pb.createMultiBody(0, shape, physicsClientId=client)
        pb.changeDynamics(terrain, -1, lateralFriction=0.8, physicsClientId=client)
        half = terrain_size * 0.25 * 0.8
        sphere = pb.createCollisionShape(pb.GEOM_SPHERE, radius=0.1, physicsClientId=client)
        balls = []
        for _ in range(ball_count):
            start = [rng.uniform(-half, half), rng.uniform(-half, half), rng.uniform(1, 3)]
            ball = pb.createMultiBody(0.1, sphere, basePosition=start, physicsClientId=client)
            pb.changeDynamics(
                ball,
                -1,
                restitution=0.6,
                rollingFriction=0.001,
                physicsClientId=client,
            )
            pb.resetBaseVelocity(
                ball,
                [rng.uniform(-2, 2), rng.uniform(-2, 2), 0],
                physicsClientId=client,
            )
            balls.append((ball, start))
        for _ in range(steps):
            pb.stepSimulation(physicsClientId=client)
        out = []
        for ball, start in balls:
            pos, _ = pb.getBasePositionAndOrientation(ball, physicsClientId=client)
            vel, _ = pb.getBaseVelocity(ball, physicsClientId=client)
            out.append(
                {
                    'x': pos[0],
                    'y': pos[1],
                    'z': pos[2],
                    'speed': sum(v * v for v in vel) ** 0.5,
                    'distance': ((pos[0] - start[0]) ** 2 + (pos[1] - start[1]) ** 2) ** 0.5,
                },
            )
        return out
    finally:
        pb.disconnect(physicsClientId=client)


@dataclasses.dataclass(kw_only=True, eq=False)
class PhysicsApp(HoldsNothing):
    """``simulations`` independent PyBullet simulations."""

    simulations: int = 8
    ball_count: int = 10
    steps: int = 1000
    terrain_size: int = 32
    seed: int = 0

    def run(self, engine: Engine, run_dir: pathlib.Path) -> None:
        """Run the simulations; write ``physics.csv``."""
        futures = [
            engine.submit(
                simulate,
                self.seed + i,
                self.ball_count,
                self.steps,
                self.terrain_size,
            )
            for i in range(self.simulations)
        ]
        rows: list[dict[str, Any]] = []
        for i, future in enumerate(futures):
            for j, ball in enumerate(future.result()):
                rows.append({'simulation': i, 'ball': j, **ball})
        write_csv(
            run_dir / 'physics.csv',
            ['simulation', 'ball', 'x', 'y', 'z', 'speed', 'distance'],
            rows,
        )
        moving = sum(1 for r in rows if r['speed'] > 0.05)
        logger.info('physics: %d balls simulated, %d still moving', len(rows), moving)


@register('app')
class PhysicsAppConfig(AppConfig):
    """Balls on random terrains, simulated with PyBullet (embarrassingly parallel)."""

    name: str = 'physics'
    simulations: int = pydantic.Field(default=8, ge=1, description='number of simulations (tasks)')
    ball_count: int = pydantic.Field(default=10, ge=1, description='balls per simulation')
    steps: int = pydantic.Field(default=1000, ge=1, description='steps per simulation (240/s)')
    terrain_size: int = pydantic.Field(default=32, ge=2, description='heightfield points per side')
    seed: int = pydantic.Field(default=0, description='random seed')
    total_time: float | None = pydantic.Field(
        default=None,
        gt=0,
        description='simulated seconds (TaPS option; sets steps to 240 per second)',
    )

    def get_app(self) -> PhysicsApp:
        """Build the app."""
        steps = self.steps if self.total_time is None else max(1, round(self.total_time * 240))
        return PhysicsApp(**self._app_arguments(exclude={'steps', 'total_time'}), steps=steps)

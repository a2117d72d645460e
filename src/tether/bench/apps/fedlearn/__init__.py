"""Federated learning: simulated devices train locally; the server averages their models.

Each round, a fraction of the simulated clients trains the global model on its own data
(a local-training task each), one aggregation task averages the trained models weighted by
the clients' sample counts (FedAvg), and one test task evaluates the new global model on
held-out data. The data set is scikit-learn's bundled ``digits`` (1797 8x8 images of
handwritten digits, shipped inside the package: no download), split among clients by a
Dirichlet distribution over the labels (``alpha``: small is skewed). The model is a
three-layer perceptron with ReLU activations (PyTorch, CPU). Per-round accuracy goes to
``fedlearn.csv`` in the run directory.
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
from tether.exceptions import ConfigError

if TYPE_CHECKING:
    from tether.bench.engine import Engine

__all__ = ['FedLearnApp', 'FedLearnAppConfig']

# 'digits' runs; the others are TaPS's torchvision data sets, accepted by name only.
_DATASETS = ('digits', 'mnist', 'fmnist', 'cifar10', 'cifar100')

logger = logging.getLogger(__name__)


@dataclasses.dataclass(kw_only=True, eq=False)
class FedLearnApp(HoldsNothing):
    """FedAvg over simulated clients (see the module docstring)."""

    clients: int = 4
    rounds: int = 2
    epochs: int = 5
    batch_size: int = 32
    lr: float = 0.1
    alpha: float = 1.0
    participation: float = 1.0
    test_fraction: float = 0.2
    seed: int = 0

    def run(self, engine: Engine, run_dir: pathlib.Path) -> None:
        """Run the rounds; write ``fedlearn.csv``."""
        from tether.bench.apps.fedlearn import _tasks

        train, test, client_data = _tasks.load_data(
            self.clients,
            self.alpha,
            self.test_fraction,
            self.seed,
        )
        del train
        state = _tasks.initial_model(self.seed)
        rng = random.Random(self.seed)
        rows: list[dict[str, Any]] = []
        global_state: Any = state
        for round_ in range(self.rounds):
            count = max(1, round(self.participation * self.clients))
            chosen = sorted(rng.sample(range(self.clients), count))
            trained = [
                engine.submit(
                    _tasks.local_train,
                    global_state,
                    client_data[c],
                    self.epochs,
                    self.batch_size,
                    self.lr,
                    self.seed + 1000 * round_ + c,
                )
                for c in chosen
                if len(client_data[c][1]) > 0
            ]
            global_state = engine.submit(_tasks.aggregate, trained)
            accuracy, loss = engine.submit(_tasks.evaluate, global_state, test).result()
            rows.append(
                {'round': round_, 'clients': len(trained), 'accuracy': accuracy, 'loss': loss}
            )
            logger.info('fedlearn round %d: accuracy %.3f, loss %.3f', round_, accuracy, loss)
        write_csv(run_dir / 'fedlearn.csv', ['round', 'clients', 'accuracy', 'loss'], rows)


@register('app')
class FedLearnAppConfig(AppConfig):
    """Federated learning with PyTorch on scikit-learn's digits (FedAvg)."""

    name: str = 'fedlearn'
    clients: int = pydantic.Field(default=4, ge=1, description='simulated devices')
    rounds: int = pydantic.Field(default=2, ge=1, description='aggregation rounds')
    epochs: int = pydantic.Field(default=5, ge=1, description='local epochs per round')
    batch_size: int = pydantic.Field(default=32, ge=1, description='local minibatch size')
    lr: float = pydantic.Field(default=0.1, gt=0, description='learning rate (SGD)')
    alpha: float = pydantic.Field(
        default=1.0, gt=0, description='Dirichlet concentration of labels'
    )
    participation: float = pydantic.Field(default=1.0, gt=0, le=1, description='clients per round')
    test_fraction: float = pydantic.Field(default=0.2, gt=0, lt=1, description='held-out samples')
    seed: int = pydantic.Field(default=0, description='random seed')
    dataset: str = pydantic.Field(
        default='digits',
        description="'digits' (scikit-learn's, bundled); TaPS's names are accepted, not run",
    )
    data_dir: pathlib.Path = pydantic.Field(
        default=pathlib.Path('data/fedlearn'),
        description="TaPS's download directory of torchvision data sets (unused)",
    )

    @pydantic.field_validator('dataset', mode='before')
    @classmethod
    def _known_dataset(cls, value: Any) -> Any:
        name = value.lower() if isinstance(value, str) else value
        if name not in _DATASETS:
            raise ValueError(f'dataset must be one of {", ".join(_DATASETS)}, not {value!r}')
        return name

    def get_app(self) -> FedLearnApp:
        """Build the app (on ``digits``: TaPS's torchvision data sets are refused here)."""
        if self.dataset != 'digits':
            raise ConfigError(
                f'fedlearn dataset {self.dataset!r} is a torchvision data set, which tether '
                'does not load (torchvision is not a dependency and nothing is downloaded): '
                "use dataset = 'digits'",
            )
        return FedLearnApp(**self._app_arguments(exclude={'dataset', 'data_dir'}))

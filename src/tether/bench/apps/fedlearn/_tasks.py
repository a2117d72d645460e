"""The fedlearn tasks and data (imports PyTorch; reads the digits file of scikit-learn)."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import torch
from torch import nn

__all__ = ['aggregate', 'evaluate', 'initial_model', 'load_data', 'local_train']

Data = tuple[np.ndarray, np.ndarray]


def _model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(64, 64),
        nn.ReLU(),
        nn.Linear(64, 32),
        nn.ReLU(),
        nn.Linear(32, 10),
    )


def initial_model(seed: int) -> dict[str, torch.Tensor]:
    """The initial global model's parameters."""
    torch.manual_seed(seed)
    return {k: v.detach().clone() for k, v in _model().state_dict().items()}


def _digits_file() -> str:
    # The CSV that sklearn.datasets.load_digits reads, found without importing
    # scikit-learn (whose import pulls in SciPy: seconds per worker process).
    spec = importlib.util.find_spec('sklearn')
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError('fedlearn needs scikit-learn: pip install "tether[bench-apps]"')
    return os.path.join(spec.submodule_search_locations[0], 'datasets', 'data', 'digits.csv.gz')


def load_data(
    clients: int,
    alpha: float,
    test_fraction: float,
    seed: int,
) -> tuple[Data, Data, list[Data]]:
    """Load scikit-learn's digits; return train, test and each client's share of train."""
    table = np.loadtxt(_digits_file(), delimiter=',')
    x = (table[:, :-1] / 16.0).astype(np.float32)
    y = table[:, -1].astype(np.int64)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    cut = int(len(y) * (1 - test_fraction))
    train = (x[order[:cut]], y[order[:cut]])
    test = (x[order[cut:]], y[order[cut:]])
    shares: list[list[int]] = [[] for _ in range(clients)]
    for label in range(10):
        idx = np.flatnonzero(train[1] == label)
        rng.shuffle(idx)
        proportions = rng.dirichlet([alpha] * clients)
        bounds = (np.cumsum(proportions) * len(idx)).astype(int)[:-1]
        for c, part in enumerate(np.split(idx, bounds)):
            shares[c].extend(part.tolist())
    client_data = [(train[0][s], train[1][s]) for s in shares]
    return train, test, client_data


def local_train(  # noqa: PLR0917 (a task: arguments are positional)
    state: dict[str, torch.Tensor],
    data: Data,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int,
) -> tuple[dict[str, torch.Tensor], int]:
    """Train the global model on one client's data; return its parameters and sample count."""
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    model = _model()
    model.load_state_dict(state)
    x, y = torch.from_numpy(np.ascontiguousarray(data[0])), torch.from_numpy(data[1])
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(y))
        for start in range(0, len(y), batch_size):
            batch = order[start : start + batch_size]
            model.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[batch]), y[batch])
            loss.backward()
            # Plain SGD, written out: torch.optim imports TorchDynamo on the first step
            # (tens of seconds per worker process on a loaded machine).
            with torch.no_grad():
                for parameter in model.parameters():
                    if parameter.grad is not None:
                        parameter.sub_(parameter.grad, alpha=lr)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, len(y)


def aggregate(trained: list[tuple[dict[str, torch.Tensor], int]]) -> dict[str, torch.Tensor]:
    """FedAvg: the sample-weighted mean of the clients' parameters."""
    total = sum(n for _, n in trained)
    keys = trained[0][0].keys()
    return {k: sum(s[k] * (n / total) for s, n in trained) for k in keys}  # type: ignore[misc]


def evaluate(state: dict[str, torch.Tensor], data: Data) -> tuple[float, float]:
    """Accuracy and mean loss of the model on ``data``."""
    torch.set_num_threads(1)
    model = _model()
    model.load_state_dict(state)
    model.eval()
    x, y = torch.from_numpy(np.ascontiguousarray(data[0])), torch.from_numpy(data[1])
    with torch.no_grad():
        logits = model(x)
        loss = float(nn.functional.cross_entropy(logits, y))
        accuracy = float((logits.argmax(1) == y).float().mean())
    return accuracy, loss

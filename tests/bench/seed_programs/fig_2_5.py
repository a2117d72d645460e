import contextlib
import pathlib
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime

from tether.bench.apps.cholesky import CholeskyApp
from tether.bench.engine import Engine
from tether.bench.executor.utils import FutureDependencyExecutor
from tether.bench.logging import init_logging


def main() -> int:
    init_logging()

    app = CholeskyApp(matrix_size=100, block_size=25)
    executor = FutureDependencyExecutor(ProcessPoolExecutor(max_workers=4))
    timestamp = datetime.now().strftime('%Y-%m-%d-%H-%M-%S')
    run_dir = pathlib.Path.cwd() / 'runs' / timestamp

    with contextlib.closing(app), Engine(executor) as engine:
        app.run(engine, run_dir)

    return 0


if __name__ == '__main__':
    raise SystemExit(main())

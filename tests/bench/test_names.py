"""The bench modules renamed by issue 26 stay importable under their old names."""

from __future__ import annotations


def test_future_dependency_executor_old_path() -> None:
    from tether.bench.executor import future_dependency, utils

    assert utils.FutureDependencyExecutor is future_dependency.FutureDependencyExecutor
    assert utils.find_futures is future_dependency.find_futures
    assert utils.substitute_futures is future_dependency.substitute_futures


def test_bench_registry_old_path() -> None:
    from tether.bench import plugins, registry

    for name in registry.__all__:
        assert getattr(plugins, name) is getattr(registry, name)
    assert plugins.__all__ == registry.__all__

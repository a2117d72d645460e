"""Command lines of private brokers on free ports, for tests that stop the broker.

Run them with :class:`tether.testing.ServerProcess` (Redis: :class:`tether.testing.RedisServer`).
"""

from __future__ import annotations

from pathlib import Path

from tether.testing import free_port


def nats_args(port: int, store_dir: Path) -> list[str]:
    return ['nats-server', '-a', '127.0.0.1', '-p', str(port), '-js', '-sd', str(store_dir)]


def mosquitto_args(port: int) -> list[str]:
    return ['mosquitto', '-p', str(port)]


def rabbitmq(port: int, base: Path) -> tuple[list[str], dict[str, str]]:
    """Command and environment of a private RabbitMQ node (no plugins) under ``base``."""
    (base / 'rabbitmq.conf').write_text(f'listeners.tcp.local = 127.0.0.1:{port}\n')
    (base / 'enabled_plugins').write_text('[].\n')
    (base / 'env.conf').write_text('')
    env = {
        'HOME': str(base),
        'RABBITMQ_CONF_ENV_FILE': str(base / 'env.conf'),
        'RABBITMQ_CONFIG_FILE': str(base / 'rabbitmq.conf'),
        'RABBITMQ_ENABLED_PLUGINS_FILE': str(base / 'enabled_plugins'),
        'RABBITMQ_NODENAME': f'tethertest{port}@localhost',
        'RABBITMQ_NODE_PORT': str(port),
        'RABBITMQ_DIST_PORT': str(free_port()),
        'RABBITMQ_MNESIA_BASE': str(base / 'mnesia'),
        'RABBITMQ_LOG_BASE': str(base / 'log'),
        'RABBITMQ_PLUGINS_EXPAND_DIR': str(base / 'plugins-expand'),
        'ERL_EPMD_ADDRESS': '127.0.0.1',
    }
    return ['/usr/lib/rabbitmq/bin/rabbitmq-server'], env

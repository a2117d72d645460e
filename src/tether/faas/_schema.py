"""The service's tables (created at start when missing)."""

from __future__ import annotations

__all__ = ['COLUMNS', 'SCHEMA']

SCHEMA = """
CREATE TABLE IF NOT EXISTS faas_users (
    user_id TEXT PRIMARY KEY,
    name TEXT UNIQUE NOT NULL,
    token_hash TEXT UNIQUE NOT NULL,
    created DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS faas_functions (
    function_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    serializer TEXT NOT NULL,
    body BYTEA NOT NULL,
    created DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS faas_endpoints (
    endpoint_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    token_hash TEXT UNIQUE NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    last_seen DOUBLE PRECISION,
    online INTEGER NOT NULL DEFAULT 0,
    info TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS faas_task_groups (
    task_group_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS faas_tasks (
    task_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    task_group_id TEXT NOT NULL,
    endpoint_id TEXT NOT NULL,
    function_id TEXT NOT NULL,
    status TEXT NOT NULL,
    header TEXT NOT NULL,
    payload BYTEA,
    result BYTEA,
    result_header TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    acknowledged INTEGER NOT NULL DEFAULT 0,
    created DOUBLE PRECISION NOT NULL,
    finished DOUBLE PRECISION,
    direct INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS faas_tasks_user_created ON faas_tasks (user_id, created);
CREATE INDEX IF NOT EXISTS faas_tasks_endpoint_status ON faas_tasks (endpoint_id, status);
CREATE INDEX IF NOT EXISTS faas_tasks_group ON faas_tasks (task_group_id);
CREATE TABLE IF NOT EXISTS faas_replicas (
    replica_id TEXT PRIMARY KEY,
    seen DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS faas_groups (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS faas_group_members (
    name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    PRIMARY KEY (name, user_id)
);
CREATE INDEX IF NOT EXISTS faas_group_members_user ON faas_group_members (user_id);
CREATE TABLE IF NOT EXISTS faas_shares (
    kind TEXT NOT NULL,
    object_id TEXT NOT NULL,
    principal TEXT NOT NULL,
    PRIMARY KEY (kind, object_id, principal)
);
"""

COLUMNS = (('faas_tasks', 'direct', 'INTEGER NOT NULL DEFAULT 0'),)
"""Columns added since the first schema: ``(table, column, type)``, added to the tables
of an older database at start (``faas_tasks.direct``: the task was handed to its
endpoint's session by the replica that took the submission, not queued in the broker;
see :meth:`tether.faas._core.Service.submit`)."""

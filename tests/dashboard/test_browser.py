"""The dashboard in a real browser (Debian's headless Chromium driven by Selenium),
over real servers: pages load with live data, filters work, and a user's dashboard never
shows another user's task.

With ``TETHER_DASHBOARD_SCREENSHOTS=DIR`` each page is saved as ``DIR/dashboard-*.png``
(the pictures of ``docs/observability.md``).
"""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard.conftest import DashboardThread, Stack
from tests.faas.conftest import wait_for

CHROMIUM = shutil.which('chromium') or '/usr/bin/chromium'
DRIVER = shutil.which('chromedriver') or '/usr/bin/chromedriver'
SHOTS = os.environ.get('TETHER_DASHBOARD_SCREENSHOTS')


@pytest.fixture(scope='module')
def browser() -> Iterator[Any]:
    if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
        pytest.fail('chromium and chromedriver are needed: run `make services`')
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ('--headless=new', '--no-sandbox', '--disable-gpu', '--window-size=1200,900'):
        options.add_argument(arg)
    options.add_argument('--disable-dev-shm-usage')
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope='module')
def dash_a(stack: Stack) -> Iterator[DashboardThread]:
    d = stack.dashboard(stack.token_a)
    yield d
    d.stop()


@pytest.fixture(scope='module')
def dash_b(stack: Stack) -> Iterator[DashboardThread]:
    d = stack.dashboard(stack.token_b)
    yield d
    d.stop()


def _open(browser: Any, dash: DashboardThread, path: str) -> None:
    browser.get(f'{dash.url}{path}')


def _login(browser: Any, dash: DashboardThread) -> None:
    browser.delete_all_cookies()
    _open(browser, dash, '/?key=test-key')
    wait_for(lambda: 'Overview' in browser.title, 30, 'the overview after the key')


def _text(browser: Any, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return str(browser.find_element(By.ID, element_id).text)


def _charts_drawn(browser: Any) -> int:
    """Charts Plotly has drawn (it adds a ``main-svg`` to each)."""
    from selenium.webdriver.common.by import By

    return len(browser.find_elements(By.CSS_SELECTOR, '.chart .main-svg'))


def _shot(browser: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(SHOTS) / f'dashboard-{name}.png'))


def test_key_is_required(dash_a: DashboardThread) -> None:
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f'{dash_a.url}/faas', timeout=30)
    assert info.value.code == 401
    body = info.value.read().decode()
    assert 'need-key' in body
    assert 'boom from user A' not in body
    info.value.close()
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f'{dash_a.url}/faas?key=wrong', timeout=30)
    info.value.close()


def test_overview_and_servers_show_live_metrics(
    browser: Any, stack: Stack, dash_a: DashboardThread
) -> None:
    _login(browser, dash_a)

    def node_up() -> bool:
        _open(browser, dash_a, '/')
        return 'node-a up node' in _text(browser, 'servers')

    wait_for(node_up, 30, 'the node server scraped')
    assert 'site-a' in _text(browser, 'endpoints')
    _shot(browser, 'overview')
    # More traffic: the server's page counts it.
    c = stack.node.connector()
    try:
        for _ in range(3):
            c.get(c.put(b'x' * 5000))
    finally:
        c.close()

    def counted() -> bool:
        _open(browser, dash_a, '/servers/node-a')
        rows = _text(browser, 'ops')
        return any(
            line.startswith('put ') and int(line.split()[1].replace(',', '')) >= 8
            for line in rows.splitlines()
        )

    wait_for(counted, 30, 'the new puts counted')
    assert 'objects' in _text(browser, 'server')
    wait_for(lambda: _charts_drawn(browser) >= 1, 30, 'the chart drawn')
    _shot(browser, 'node')
    _open(browser, dash_a, '/servers/faas-endpoint-a')
    wait_for(lambda: 'faas-endpoint' in _text(browser, 'server'), 30, 'the agent page')
    _open(browser, dash_a, '/servers')
    wait_for(lambda: _charts_drawn(browser) >= 2, 30, 'the charts drawn')
    _shot(browser, 'servers')


def test_tasks_filter_and_task_page(browser: Any, stack: Stack, dash_a: DashboardThread) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _login(browser, dash_a)
    _open(browser, dash_a, '/faas')
    tasks = _text(browser, 'tasks')
    for task_id in stack.tasks_a.values():
        assert task_id[:8] in tasks
    assert 'site-a' in _text(browser, 'endpoints')
    _shot(browser, 'faas')
    Select(browser.find_element(By.ID, 'filter-state')).select_by_value('failed')
    browser.find_element(By.ID, 'filter-apply').click()
    wait_for(lambda: 'state=failed' in browser.current_url, 30, 'the filter applied')
    tasks = _text(browser, 'tasks')
    assert stack.tasks_a['failing'][:8] in tasks
    assert stack.tasks_a['chatty'][:8] not in tasks
    # By function name, as typed.
    _open(browser, dash_a, '/faas?function=quiet')
    tasks = _text(browser, 'tasks')
    assert stack.tasks_a['quiet'][:8] in tasks
    assert stack.tasks_a['failing'][:8] not in tasks

    _open(browser, dash_a, f'/faas/tasks/{stack.tasks_a["failing"]}')
    assert 'boom from user A' in _text(browser, 'task-error')
    assert 'chatty_then_fail' in _text(browser, 'task-traceback')
    assert _text(browser, 'task-stdout') == 'before the failure'
    assert _text(browser, 'task-stderr') == 'about to fail'
    assert 'function' in _text(browser, 'timings')
    wait_for(lambda: _charts_drawn(browser) >= 1, 30, 'the timings chart drawn')
    _shot(browser, 'task')
    _open(browser, dash_a, f'/faas/tasks/{stack.tasks_a["chatty"]}')
    assert _text(browser, 'task-stdout') == 'working on 41'


def test_another_users_task_is_never_shown(
    browser: Any, stack: Stack, dash_b: DashboardThread
) -> None:
    _login(browser, dash_b)
    _open(browser, dash_b, '/faas')
    tasks = _text(browser, 'tasks')
    assert stack.task_b[:8] in tasks
    endpoints = _text(browser, 'endpoints')
    assert 'site-b' in endpoints
    assert 'site-a' not in endpoints
    source = browser.page_source
    for task_id in stack.tasks_a.values():
        assert task_id[:8] not in source
    assert 'boom from user A' not in source
    _open(browser, dash_b, f'/faas/tasks/{stack.tasks_a["failing"]}')
    assert 'No task' in _text(browser, 'not-found')
    assert 'boom from user A' not in browser.page_source
    assert 'before the failure' not in browser.page_source


def test_steering_and_bench_pages(browser: Any, dash_a: DashboardThread) -> None:
    _login(browser, dash_a)
    _open(browser, dash_a, '/steer')
    assert 'simulate 7 1' in _text(browser, 'steer-0')
    wait_for(lambda: _charts_drawn(browser) >= 2, 30, 'the campaign charts drawn')
    _shot(browser, 'steer')
    _open(browser, dash_a, '/bench')
    assert 'synthetic thread-pool 2' in _text(browser, 'runs')
    wait_for(lambda: _charts_drawn(browser) >= 1, 30, 'the makespan chart drawn')
    _open(browser, dash_a, '/bench/synthetic_thread-pool_2026-11-29-12-00-00')
    assert '20 tasks' in _text(browser, 'run-tasks')
    wait_for(lambda: _charts_drawn(browser) >= 2, 30, 'the run charts drawn')
    _shot(browser, 'bench')

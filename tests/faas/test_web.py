"""The service's web page in a real headless Chromium (Debian's chromium + chromedriver)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.faas import _tasks
from tests.faas.conftest import AgentThread, new_user, wait_for
from tether.faas import Client
from tether.faas._server import ServiceThread


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    driver_path = shutil.which('chromedriver')
    if driver_path is None:
        pytest.fail('chromedriver is missing: run `make services` (installs chromium-driver)')
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which('chromium') or '/usr/bin/chromium'
    for arg in ('--headless=new', '--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def rows(driver: Any, table: str) -> list[list[str]]:
    from selenium.webdriver.common.by import By

    return [
        [td.text for td in tr.find_elements(By.TAG_NAME, 'td')]
        for tr in driver.find_elements(By.CSS_SELECTOR, f'#{table} tbody tr')
    ]


def test_page_lists_the_users_endpoints_and_recent_tasks(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread], browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    user, token = new_user(prod_service)
    other, _other_token = new_user(prod_service)
    ep = start_endpoint(prod_service, user, name='beamline', max_workers=2)
    start_endpoint(prod_service, other, name='someone-else')
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_tasks.square)
        tid = client.run(fid, ep.config.endpoint_id, 3)
        wait_for(lambda: client.get_task(tid)['status'] == 'success', what='the task')

    browser.get(prod_service.url + '/')
    assert browser.title == 'tether function service'
    browser.find_element(By.ID, 'token').send_keys('tfu_wrong')
    browser.find_element(By.ID, 'show').click()
    wait_for(lambda: 'unknown or revoked token' in browser.find_element(By.ID, 'error').text)
    assert rows(browser, 'endpoints') == []

    field = browser.find_element(By.ID, 'token')
    field.clear()
    field.send_keys(token)
    browser.find_element(By.ID, 'show').click()
    endpoints = wait_for(lambda: rows(browser, 'endpoints'), what='endpoint rows')
    assert len(endpoints) == 1  # not the other user's
    name, endpoint_id, status, engine, workers, _idle, queued, _running = endpoints[0]
    assert (name, endpoint_id, status, engine) == (
        'beamline',
        ep.config.endpoint_id,
        'online',
        'process',
    )
    assert int(workers) >= 1
    assert int(queued) == 0
    tasks = wait_for(lambda: rows(browser, 'tasks'), what='task rows')
    assert tasks[0][:4] == [tid, 'square', ep.config.endpoint_id, 'success']
    assert browser.find_element(By.ID, 'error').text == ''
    # The token is in the tab's session storage, never in the URL or a cookie.
    assert token not in browser.current_url
    assert browser.get_cookies() == []

"""A function deleted through another replica while a submission to it is under way: the
submission's check found the function (this replica had not heard of the deletion yet),
but its tasks are not recorded or queued, and the client is told the function was
deleted, rather than a task being queued for a function that no longer exists."""

from __future__ import annotations

import pytest

from tests.faas import _tasks
from tests.faas.conftest import new_endpoint, new_user
from tether.exceptions import FaasNotFoundError
from tether.faas import Client
from tether.faas._server import ServiceThread


@pytest.mark.parametrize('kind', ['prod_service', 'dev_service'])
def test_a_task_of_a_function_deleted_meanwhile_is_refused_not_queued(
    kind: str, request: pytest.FixtureRequest
) -> None:
    st: ServiceThread = request.getfixturevalue(kind)
    assert st.service is not None
    service = st.service
    user, token = new_user(st)
    eid, _ = new_endpoint(st, user)  # no agent: what is queued stays in its queue
    with Client(st.url, token) as client:
        fid = client.register_function(_tasks.square)
        first = client.run(fid, eid, 3)  # the replica now knows the user owns fid
        # Deleted through another replica, whose broadcast has not come yet: the row is
        # gone, this replica's cache still says the user owns it.
        st.call(service.repo.db.execute('DELETE FROM faas_functions WHERE function_id = $1', fid))
        before = {r['task_id'] for r in st.call(service.repo.recent_tasks(user, 10))}
        with pytest.raises(FaasNotFoundError, match=f'function {fid} was deleted while'):
            client.run(fid, eid, 4)
        after = {r['task_id'] for r in st.call(service.repo.recent_tasks(user, 10))}
        assert after == before == {first}
        ready, _ = st.call(service.broker.stats(service.task_queue(eid)))
        assert ready == 1  # the first task's message only
        # Other functions of the same batch are still queued (and said so).
        other = client.register_function(_tasks.add)
        assert client.run(other, eid, 1, b=2)
        ready, _ = st.call(service.broker.stats(service.task_queue(eid)))
        assert ready == 2

"""Sharing (issue 27 item 5, the funcX paper's model): a function shared with named users
or groups, an endpoint whose owner lets named users or groups run on it, and revocation;
everything not shared stays private (404, as another user's objects always were)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.faas import _tasks
from tests.faas.conftest import AgentThread, new_user, result_of
from tether.exceptions import FaasBadRequestError, FaasNotFoundError
from tether.faas import Client
from tether.faas._server import ServiceThread


def user(st: ServiceThread) -> tuple[str, Client]:
    """A new user: its name and a client."""
    assert st.service is not None
    uid, token = new_user(st)
    name: str = st.call(st.service.repo.user_name(uid))
    return name, Client(st.url, token)


@pytest.mark.parametrize('which', ['prod_service', 'dev_service'])
def test_a_shared_function_runs_for_its_users_until_revoked(
    which: str, request: pytest.FixtureRequest, start_endpoint: Callable[..., AgentThread]
) -> None:
    st: ServiceThread = request.getfixturevalue(which)
    owner_name, owner = user(st)
    runner_name, runner = user(st)
    _, stranger = user(st)
    assert st.service is not None
    runner_id = runner._request('GET', '/v1/whoami', 'whoami').json()['user_id']
    ep = start_endpoint(st, runner_id)  # the runner's own endpoint
    eid = ep.config.endpoint_id
    with owner, runner, stranger:
        fid = owner.register_function(_tasks.square)
        with pytest.raises(FaasNotFoundError):
            runner.run(fid, eid, 3)
        with pytest.raises(FaasNotFoundError):
            runner.get_function(fid)

        assert owner.share_function(fid, users=[runner_name]) == {
            'users': [runner_name],
            'groups': [],
        }
        assert result_of(runner, runner.run(fid, eid, 3)) == 9
        assert runner.get_function(fid)['function_id'] == fid
        # Not shared with the stranger, who cannot change the share either.
        with pytest.raises(FaasNotFoundError):
            stranger.get_function(fid)
        with pytest.raises(FaasNotFoundError):
            stranger.share_function(fid, users=[runner_name])
        with pytest.raises(FaasNotFoundError):
            runner.share_function(fid, users=[runner_name])  # shared is not owned

        assert owner.share_function(fid) == {'users': [], 'groups': []}  # revoked
        with pytest.raises(FaasNotFoundError):
            runner.run(fid, eid, 4)
        with pytest.raises(FaasNotFoundError):
            runner.get_function(fid)
        assert owner_name != runner_name


def test_an_endpoint_shared_with_a_group_runs_its_members_tasks_until_revoked(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    st = prod_service
    _, owner = user(st)
    member_name, member = user(st)
    other_name, other = user(st)
    owner_id = owner._request('GET', '/v1/whoami', 'whoami').json()['user_id']
    ep = start_endpoint(st, owner_id)
    eid = ep.config.endpoint_id
    group = f'lab-{member_name}'
    with owner, member, other:
        fid = member.register_function(_tasks.add)  # the member's own function
        with pytest.raises(FaasNotFoundError):
            member.run(fid, eid, 1, b=2)

        assert owner.set_group(group, [member_name]) == [member_name]
        assert owner.share_endpoint(eid, groups=[group]) == {'users': [], 'groups': [group]}
        assert owner.get_sharing(endpoint_id=eid) == {'users': [], 'groups': [group]}
        assert result_of(member, member.run(fid, eid, 1, b=2)) == 3
        # The task is the member's: the owner does not see it, the member's results are
        # the member's.
        other_fid = other.register_function(_tasks.add)
        with pytest.raises(FaasNotFoundError):
            other.run(other_fid, eid, 1)
        with pytest.raises(FaasNotFoundError):
            member.get_endpoint_status(eid)  # running on it is not owning it
        with pytest.raises(FaasNotFoundError):
            member.delete_endpoint(eid)

        # Revoked by leaving the group.
        assert owner.set_group(group, [other_name]) == [other_name]
        with pytest.raises(FaasNotFoundError):
            member.run(fid, eid, 2, b=2)
        assert result_of(other, other.run(other_fid, eid, 5, b=5)) == 10

        # Shared by name, then revoked by the share.
        owner.share_endpoint(eid, users=[member_name])
        assert result_of(member, member.run(fid, eid, 2, b=3)) == 5
        with pytest.raises(FaasNotFoundError):
            other.run(other_fid, eid, 1)  # the group was replaced by the share
        owner.share_endpoint(eid)
        with pytest.raises(FaasNotFoundError):
            member.run(fid, eid, 2, b=2)
        # The endpoint still serves its owner.
        own = owner.register_function(_tasks.square)
        assert result_of(owner, owner.run(own, eid, 6)) == 36


def test_sharing_names_are_checked_and_groups_belong_to_their_owner(
    prod_service: ServiceThread,
) -> None:
    st = prod_service
    owner_name, owner = user(st)
    _, other = user(st)
    with owner, other:
        fid = owner.register_function(_tasks.square)
        with pytest.raises(FaasBadRequestError, match='no user named'):
            owner.share_function(fid, users=['nobody-at-all'])
        with pytest.raises(FaasBadRequestError, match='no group named'):
            owner.share_function(fid, groups=['no-such-group'])
        with pytest.raises(TypeError):
            owner.share_function(fid, users=owner_name)
        group = f'g-{owner_name}'
        owner.set_group(group, [])
        with pytest.raises(FaasBadRequestError, match='another user'):
            other.set_group(group, [])
        with pytest.raises(FaasBadRequestError, match='"users"'):
            owner._request('PUT', f'/v1/functions/{fid}/sharing', 'x', json={'users': 'a'})
        with pytest.raises(TypeError):
            owner.get_sharing()
        # A deleted function's share goes with it.
        owner.share_function(fid, groups=[group])
        owner.delete_function(fid)
        with pytest.raises(FaasNotFoundError):
            owner.get_sharing(function_id=fid)

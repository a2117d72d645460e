"""tether's errors of agents, test helpers, endpoints, the function service, the
benchmark suite and steering.

Public home: :mod:`tether.exceptions` (which draws the tree).
"""

from __future__ import annotations

from tether._errors_data import ConfigError, TetherError

# Agents (tether.agents, issue 11) -------------------------------------------------------


class AgentError(TetherError):
    """Base class for errors of :mod:`tether.agents`."""


class MailboxClosedError(AgentError):
    """The mailbox was terminated: its agent shut down for good and takes no messages."""


class UnknownMailboxError(AgentError):
    """The exchange has no mailbox with that id (never registered, or another exchange)."""


class MailboxLostError(AgentError):
    """The exchange lost a mailbox and what it held (Redis restarted without its data).

    Raised for requests that waited for an answer when the caller's mailbox was found
    gone: the request or its answer may be lost, and the action may or may not have run.
    The mailboxes are registered again, so new requests work.
    """


class MessageRejectedError(AgentError):
    """A message was refused by its receiver.

    Reasons: another protocol version, a message that is not valid, an unknown action, or
    a pickled value sent to a receiver that does not accept pickles.
    """


class ActionError(AgentError):
    """A remote action raised an exception whose type is not rebuilt at the caller.

    Attributes:
        type_name: Import path of the remote exception's type.
        remote_traceback: The traceback formatted where the action ran.
    """

    def __init__(
        self, type_name: str = 'Exception', message: str = '', remote_traceback: str = ''
    ) -> None:
        self.type_name = type_name
        self.remote_traceback = remote_traceback
        super().__init__(f'{type_name}: {message}')

    def __reduce__(self) -> tuple[object, ...]:
        text = str(self).partition(': ')[2]
        return (type(self), (self.type_name, text, self.remote_traceback))


class ActionTimeoutError(AgentError, TimeoutError):
    """No result arrived within the caller's timeout; the action was cancelled at the agent."""


class AgentLaunchError(AgentError):
    """An agent could not be launched, or failed more often than its restart limit."""


class AgentStateError(AgentError):
    """An agent's persistent state cannot be read or written."""


class AgentCrashedError(AgentError):
    """The agent's process died while it held the request.

    Sent to the caller by the agent's launcher (or by the restarted agent) for every
    request the dead process had accepted and not answered; it is never re-run.

    Attributes:
        started: Whether the action had started: it may then have partly run. ``False``:
            the request waited for a free slot (``max_concurrency``) and did not run at
            all, so sending it again is safe.
    """

    def __init__(self, message: str = '', started: bool = True) -> None:
        super().__init__(message, started)
        self.started = started

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ''


class AgentConfigError(AgentError, TypeError):
    """The agents API was given something it cannot use (also a :class:`TypeError`).

    For example an executor where a launcher goes (``Manager(exchange,
    ThreadPoolExecutor())``): the message names what is expected.
    """


class BehaviorDefinitionError(AgentConfigError):
    """A :class:`~tether.agents.Behavior` class is not valid (also a :class:`TypeError`).

    Raised when the class is defined, for example when it declares an action with a name
    that handles or behaviors reserve (see ``tether.agents.RESERVED_ACTION_NAMES``).
    """


# Test helpers (tether.testing) ----------------------------------------------------------


class HarnessError(TetherError):
    """Base class for errors of the test helpers in :mod:`tether.testing`."""


class ServerStartError(HarnessError, RuntimeError):
    """A throwaway server (:class:`tether.testing.ServerProcess`) did not start.

    The message names the program, the port and the last lines the program printed.
    """


class HammerError(HarnessError, AssertionError):
    """Calls made from many threads by :func:`tether.testing.hammer` failed or hung.

    Attributes:
        report: The :class:`tether.testing.HammerReport` of the run.
    """

    def __init__(self, report: object) -> None:
        self.report = report
        super().__init__(str(report))

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.report,))


# Endpoints and the relay (tether.endpoint, tether.relay, issue 10) ------------------------


class EndpointError(TetherError):
    """An endpoint or the relay is misconfigured, not running, or refused an operation."""


class PeeringError(EndpointError):
    """No path (direct, hole-punched or relayed) to a peer endpoint could be opened."""


# Function service (tether.faas, issue 13) ----------------------------------------------


class FaasError(TetherError):
    """Base class for errors of :mod:`tether.faas` (service, endpoints, SDK)."""


class FaasConnectionError(FaasError):
    """The function service could not be reached (the SDK retried until its deadline)."""


class FaasAuthenticationError(FaasError):
    """The service refused the token (missing, wrong or revoked): HTTP 401."""


class FaasNotFoundError(FaasError):
    """No function, endpoint, task or task group with that id is visible to this user.

    Another user's objects are reported exactly like missing ones (HTTP 404), so ids
    cannot be probed.
    """


class FaasPayloadTooLargeError(FaasError):
    """A task's arguments or result exceed the service's payload limit.

    Pass large objects by reference instead: ``Executor(endpoint_id, store=store)``
    proxies arguments above a threshold through a tether Store.
    """


class FaasBadRequestError(FaasError, ValueError):
    """The service refused a malformed request (HTTP 400): a field of the wrong type,
    an id that is too long or has other characters than an id may, JSON nested too
    deeply. Also a :class:`ValueError`. The message names the field."""


class FaasRateLimitError(FaasError):
    """A per-user limit of the service was reached (HTTP 429, WebSocket close 4429): too
    many requests in progress or WebSockets open at once. The SDK waits and retries
    (for ``retry_deadline`` seconds) before raising it.

    Attributes:
        retry_after: Seconds the service asked to wait (its ``Retry-After``).
    """

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        self.retry_after = retry_after
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.retry_after))


class FunctionNotAllowedError(FaasError):
    """The endpoint's allowlist does not list the function: it was not run."""


class TaskPending(FaasError):  # noqa: N818 (the funcX SDK's name)
    """``get_result`` was called before the task finished; try again later.

    Attributes:
        task_id: The task asked about.
        status: Its current status (``'waiting-for-ep'``, ``'running'`` ...).
    """

    def __init__(self, task_id: str, status: str) -> None:
        self.task_id = task_id
        self.status = status
        super().__init__(f'task {task_id} is not finished yet (status {status!r})')

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.task_id, self.status))


class TaskExecutionFailed(FaasError):  # noqa: N818 (the Globus Compute SDK's name)
    """The function raised on the endpoint (or could not be run there).

    The remote exception is not unpickled: its type name, message and formatted
    traceback travel as text.

    Attributes:
        remote_type: The qualified name of the remote exception's class.
        remote_traceback: The formatted remote traceback.
    """

    def __init__(self, remote_type: str, message: str, remote_traceback: str = '') -> None:
        self.remote_type = remote_type
        self.remote_traceback = remote_traceback
        super().__init__(f'{remote_type}: {message}' if remote_type else message)

    def __reduce__(self) -> tuple[object, ...]:
        text = str(self)
        prefix = f'{self.remote_type}: '
        message = text[len(prefix) :] if text.startswith(prefix) else text
        return (type(self), (self.remote_type, message, self.remote_traceback))


class WorkerLostError(TaskExecutionFailed):
    """The worker running the task died (killed, crashed, out of memory) more times than
    the endpoint's retry limit allows."""


class EndpointDeletedError(TaskExecutionFailed):
    """The task's endpoint was deleted before the task finished (queued or running)."""


class TaskTimeoutError(TaskExecutionFailed):
    """The task ran longer than its time limit (``task_timeout``): its worker was stopped
    and replaced."""


class TaskCancelledError(TaskExecutionFailed):
    """The task was cancelled (``TaskFuture.cancel()``, ``Client.cancel``) before it
    finished: removed from its queue, or stopped on its worker."""


# Benchmark suite (tether.bench, issue 12) --------------------------------------------


class BenchError(TetherError):
    """Base class for errors of :mod:`tether.bench`."""


class PluginNotFoundError(BenchError, ConfigError):
    """No registered app, executor, transformer or filter has the requested name."""


class PluginKindError(BenchError, ConfigError, ValueError):
    """A plugin kind other than app, executor, filter or transformer (also a
    :class:`ValueError`, which TaPS raised)."""


class PluginRegistrationError(BenchError, ConfigError, RuntimeError):
    """A plugin class cannot be registered: it has no name, or its name is taken (also a
    :class:`RuntimeError`, which TaPS raised)."""


class TaskDependencyError(BenchError):
    """A task never ran because a task whose result it takes as input failed.

    The parent's error is chained as ``__cause__``.

    Attributes:
        task_id: The id of the task that failed first (``None`` if unknown).
    """

    def __init__(self, message: str, task_id: str | None = None) -> None:
        self.task_id = task_id
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.task_id))


# Steering (tether.steer, issue 14) ------------------------------------------------------


class SteerError(TetherError):
    """Base class for errors of :mod:`tether.steer`."""


class SteerQueueError(SteerError):
    """A task queue failed: its broker is unreachable, restarted, or the queue is closed.

    Raised instead of reconnecting silently when the broker may have lost queued tasks or
    results (for example a Redis server restarted without persistence). The broker
    client's error, if any, is chained as ``__cause__``.
    """


class SteerAuthenticationError(SteerQueueError):
    """A queue message is unsigned, altered, or signed with another queue key.

    Raised (or, on a task server, logged and the message dropped) before anything in the
    message is unpickled.
    """


class SteerReplayError(SteerAuthenticationError):
    """A signed queue message was read before, was sent to another queue or topic, or is
    older than the queues' ``max_age``."""


class SteerTimeoutError(SteerError, TimeoutError):
    """No result (or no task) arrived within the timeout."""


class KillSignalError(SteerError):
    """The queues received the kill signal: the campaign is shutting down."""


class ExecutableMethodError(SteerError):
    """The program of an executable method could not start or exited with an error.

    The message gives the command, the exit status and the end of its standard error.
    """

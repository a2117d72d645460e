"""academy-py 1.0's exception names, in tether's error tree.

Where academy-py and tether have the same error, the academy-py name is the tether class
itself (``MailboxTerminatedError is tether.exceptions.MailboxClosedError``), so an
``except`` clause of a ported program catches what tether raises. Errors tether has no
counterpart for are classes of their own under :class:`~tether.exceptions.AgentError`.
All of them derive from :class:`~tether.exceptions.TetherError`.
"""

from __future__ import annotations

import pickle

from tether.exceptions import (
    ActionError,
    AgentError,
    AgentLaunchError,
    AuthenticationError,
    FrameTooLargeError,
    MailboxClosedError,
    MessageRejectedError,
    UnknownMailboxError,
)

__all__ = [
    'AcademyRemoteError',
    'ActionCancelledError',
    'ActionInvalidStateError',
    'AgentNotInitializedError',
    'AgentTerminatedError',
    'AlreadyLaunchedError',
    'BadEntityIdError',
    'DeserializationMethodProhibitedError',
    'ExceptionSerializationError',
    'ExchangeClientNotFoundError',
    'ExchangeError',
    'ExchangeNotPicklableError',
    'ForbiddenError',
    'IncompatibleNetworkProtocolError',
    'LaunchBatchClosedError',
    'MailboxTerminatedError',
    'MessageTooLargeError',
    'PingCancelledError',
    'UnauthorizedError',
    'UnknownActionError',
    'UserTerminatedError',
]

ExchangeError = AgentError
"""academy-py's base of exchange errors: tether's :class:`AgentError`."""

MailboxTerminatedError = MailboxClosedError
"""The mailbox was terminated (tether does not tell agent and user mailboxes apart here)."""

AgentTerminatedError = MailboxClosedError
"""An agent's mailbox was terminated: the same class as :data:`MailboxTerminatedError`."""

UserTerminatedError = MailboxClosedError
"""A user's mailbox was terminated: the same class as :data:`MailboxTerminatedError`."""

BadEntityIdError = UnknownMailboxError
"""No mailbox (or no agent of this manager) has that id."""

AcademyRemoteError = ActionError
"""A remote error whose type cannot be rebuilt at the caller."""

IncompatibleNetworkProtocolError = MessageRejectedError
"""A message of another protocol version (or otherwise invalid) was refused."""

MessageTooLargeError = FrameTooLargeError
"""A message exceeds the size the transport accepts."""

UnauthorizedError = AuthenticationError
"""The exchange refused the client's credentials."""

DeserializationMethodProhibitedError = MessageRejectedError
"""A message needed a deserializer (pickle) that the receiver does not accept."""


class ActionCancelledError(AgentError):
    """The action was cancelled before it finished (by the caller, or at shutdown)."""


class ActionInvalidStateError(AgentError):
    """The action was in a state that does not allow this operation."""


class AgentNotInitializedError(AgentError):
    """An agent's runtime attribute (its id, context or exchange) was used before the
    agent started running."""


class PingCancelledError(AgentError):
    """A ping was cancelled (its agent shut down) before it was answered."""


class ForbiddenError(AgentError):
    """The exchange refused an operation on a mailbox the client does not own."""


class ExchangeClientNotFoundError(AgentError):
    """No exchange client is available in this context (outside a manager or agent)."""


class ExceptionSerializationError(AgentError):
    """An exception raised by an action could not be serialized for its caller."""


class AlreadyLaunchedError(AgentLaunchError, RuntimeError):
    """``launch(registration=...)`` of an agent the manager launched already (also a
    ``RuntimeError``, as academy-py raised)."""


class LaunchBatchClosedError(AgentLaunchError, RuntimeError):
    """A launch batch was used after its ``async with`` block ended (also a
    ``RuntimeError``, as academy-py raised)."""


class ExchangeNotPicklableError(AgentError, pickle.PicklingError):
    """An in-memory exchange (its factory) was pickled: another process could not reach
    it (also a ``pickle.PicklingError``, as academy-py raised)."""


class UnknownActionError(MessageRejectedError, AttributeError):
    """The agent has no action of that name (also an ``AttributeError``, as academy-py
    raised for a missing action)."""

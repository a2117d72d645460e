"""Entity ids under academy-py 1.0's names: :class:`AgentId` and :class:`UserId`.

tether addresses every mailbox by a string (``agent-<hex>`` or ``client-<hex>``). These
classes are those strings, with the attributes academy-py's ids have (``uid``, ``name``,
``role`` and ``new()``), so an id works wherever tether takes a mailbox id and a program
written against academy-py's ids keeps working.

```python
from tether.agents.identifier import AgentId

aid = AgentId.new(name='folder')
assert aid.role == 'agent' and aid.name == 'folder'
assert aid.startswith('agent-')       # and it is the mailbox id itself
```
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar, Generic, Self, TypeVar

from tether.exceptions import InvalidArgumentError

__all__ = ['AgentId', 'EntityId', 'UserId', 'entity_id']

A = TypeVar('A')


class _EntityId(str):
    """A mailbox id with academy-py's id attributes."""

    role: ClassVar[str] = ''
    name: str | None

    def __new__(
        cls, value: str | None = None, name: str | None = None, *, uid: uuid.UUID | None = None
    ) -> Self:
        if value is None and uid is not None:
            value = f'{cls._prefix()}-{uuid.UUID(str(uid)).hex}'  # academy-py's AgentId(uid=)
        if not isinstance(value, str) or not value.startswith(f'{cls._prefix()}-'):
            raise InvalidArgumentError(
                f'{cls.__name__} needs a mailbox id starting with {cls._prefix()!r}-, '
                f'got {value!r:.80}',
            )
        self = super().__new__(cls, str.__str__(value))  # not __str__: the display form
        self.name = name
        return self

    @classmethod
    def _prefix(cls) -> str:
        return 'client' if cls.role == 'user' else cls.role

    @classmethod
    def new(cls, name: str | None = None) -> Self:
        """A fresh id (optionally with a human-readable ``name``, which is not part of
        the id: two ids are equal when their mailbox ids are)."""
        return cls(f'{cls._prefix()}-{uuid.uuid4().hex}', name)

    @property
    def uid(self) -> uuid.UUID:
        """The id as a UUID (the mailbox id's hex part; any other id is hashed to one)."""
        tail = self.split('-', 1)[1]
        try:
            return uuid.UUID(hex=tail)
        except ValueError:
            return uuid.uuid5(uuid.NAMESPACE_URL, self.mailbox_id)

    @property
    def mailbox_id(self) -> str:
        """The mailbox id as a plain ``str`` (``agent-<hex>``; also what f-strings,
        ``format()``, ``==`` and encoding see)."""
        return str.__str__(self)

    def __str__(self) -> str:
        # academy-py 1.0 prints ids as AgentId<name> (or the uid's first 8 hex digits)
        name = self.name if self.name is not None else self.uid.hex[:8]
        return f'{type(self).__name__}<{name}>'

    def __format__(self, spec: str) -> str:
        return format(self.mailbox_id, spec)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.mailbox_id, self.name))

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.mailbox_id!r})'


class AgentId(_EntityId, Generic[A]):
    """The id of an agent's mailbox (``agent-<hex>``); generic in the agent's type."""

    role: ClassVar[str] = 'agent'


class UserId(_EntityId):
    """The id of a user's (client) mailbox (``client-<hex>``)."""

    role: ClassVar[str] = 'user'


EntityId = AgentId[Any] | UserId
"""An agent's or a user's id."""


def entity_id(mailbox_id: str) -> AgentId[Any] | UserId:
    """The :class:`AgentId` or :class:`UserId` of a mailbox id (unchanged if it is one).

    Raises:
        InvalidArgumentError: for a string that is not a tether mailbox id.
    """
    if isinstance(mailbox_id, AgentId | UserId):
        return mailbox_id
    if isinstance(mailbox_id, str) and mailbox_id.startswith('client-'):
        return UserId(mailbox_id)
    return AgentId(mailbox_id)

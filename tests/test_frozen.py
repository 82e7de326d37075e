"""The positional builders the hot reads use are the dataclasses' own objects, built faster.

``agentstore.types.frozen.positional_builder`` makes an instance of a same-layout
twin class, stores its slots and switches its ``__class__`` (decision record 0035). What
a caller gets must be indistinguishable from the class's own constructor:
type, equality, hash, repr, frozenness, pickling and ``dataclasses.replace`` —
for every value object a read builds this way — and a class the trick cannot
mirror is refused when the builder is made, never built some other way.
"""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from agentstore.types import EntryEntity, MessageEntity, MessagePartEntity, RunStep
from agentstore.types.frozen import positional_builder, require_fields

STAMP = datetime(2026, 12, 1, 13, 0, 0, 123456, tzinfo=UTC)
PART = MessagePartEntity(type="image", mime_type="image/png", data=b"\x89PNG", width=1, height=2)
MESSAGE = MessageEntity(
    role="assistant", content="hi", provider="p", model="m", parts=(PART,), timestamp=STAMP
)
SAMPLES: list[Any] = [
    PART,
    MESSAGE,
    EntryEntity(
        id="e2",
        session_id="s",
        type="message",
        created_at=STAMP,
        parent_id="e1",
        message=MESSAGE,
        data_json='{"k": 1}',
        tool_name="read",
        token_estimate=3,
        model_facing=True,
        seq=2,
    ),
    RunStep(session_id="s", step_index=3, content="c", tool_args=b"[1]", created_at=STAMP),
]


@pytest.mark.parametrize("own", SAMPLES, ids=lambda value: type(value).__name__)
def test_a_built_object_is_the_class_own(own: Any) -> None:
    cls = type(own)
    values = [getattr(own, f.name) for f in dataclasses.fields(cls)]
    built = positional_builder(cls)(*values)
    assert type(built) is cls
    assert built == own
    assert hash(built) == hash(own)
    assert repr(built) == repr(own)
    assert pickle.loads(pickle.dumps(built)) == own
    first = dataclasses.fields(cls)[0].name
    assert dataclasses.replace(built, **{first: values[0]}) == own
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, first, values[0])
    # A name that is no field fails alike on both (no __dict__; on Python 3.11 a
    # frozen, slotted dataclass raises TypeError there, not AttributeError).
    assert _refusal(built) is _refusal(own) is not None


def _refusal(value: Any) -> type[Exception] | None:
    try:
        value.not_a_field = 1
    except Exception as error:  # noqa: BLE001 - which one is what is compared
        return type(error)
    return None  # pragma: no cover - a failure


def test_require_fields_refuses_another_order() -> None:
    require_fields(MessagePartEntity, tuple(f.name for f in dataclasses.fields(MessagePartEntity)))
    with pytest.raises(ImportError, match="MessagePartEntity"):
        require_fields(MessagePartEntity, ("text", "type", "mime_type", "name", "data"))


@dataclass(frozen=True)
class _NoSlots:
    a: int


@dataclass(frozen=True, slots=True)
class _Base:
    a: int


@dataclass(frozen=True, slots=True)
class _Derived(_Base):
    b: int


@dataclass(frozen=True, slots=True)
class _PostInit:
    a: int

    def __post_init__(self) -> None:  # pragma: no cover - never built here
        pass


@dataclass(frozen=True, slots=True)
class _NotInInit:
    a: int
    b: int = dataclasses.field(default=0, init=False)


@pytest.mark.parametrize("cls", [_NoSlots, _Derived, _PostInit, _NotInInit, dict])
def test_a_class_the_twin_cannot_mirror_is_refused(cls: type[Any]) -> None:
    with pytest.raises(TypeError):
        positional_builder(cls)

"""Fast constructors for the frozen value objects the hot reads build from rows.

(And the agentsession format's per-append objects: this module imports nothing of
agentstore's, and its package imports its stores lazily, so the format may use it.)

    new_step = positional_builder(RunStep)
    step = new_step(session_id, step_index, step_type, ...)  # every field, in field order

The value objects (``RunStep``, ``EntryEntity``, ``MessageEntity`` …) are frozen,
slotted dataclasses. Their generated ``__init__`` sets each field through
``object.__setattr__`` (~80 ns a field); a read of 50 entries built 150 of them
and spent more on that than SQLite spent on the rows (decision record 0035). The
first fix set each slot through its descriptor's ``__set__`` (~40 ns a field,
plus the keyword matching of a 20-keyword call, which CPython does by searching
the keyword names once per parameter).

A builder here does it in ~10 ns a field: it makes an instance of a plain twin
class declared with the *same* ``__slots__`` (same layout, same base ``object``),
stores each field with an ordinary attribute store (which CPython specialises to
a direct slot write), then switches the instance's ``__class__`` to the
dataclass — which CPython allows exactly when the two layouts are the same. The
result *is* an instance of the dataclass: ``type()``, ``==``, ``hash``,
``repr`` and the frozen ``__setattr__`` are its own (decision record 0035). Arguments
are positional, in ``dataclasses.fields`` order: a keyword call would cost more
than the slots. Callers pin that order with :func:`require_fields`.

A class the twin cannot mirror (a base other than ``object``, no slots, a
``__post_init__``, defaults it would need) is refused when the builder is made,
at import time, never silently built differently; and every builder checks
itself once against the class's own constructor before it is returned.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["positional_builder", "require_fields"]

T = TypeVar("T")


def require_fields(cls: type[Any], names: tuple[str, ...]) -> None:
    """Refuse (``ImportError``) a dataclass whose fields are no longer ``names``, in order.

    A positional call of a builder is written for one field order; a field
    added, removed or moved must fail loudly at import, not fill a wrong slot.
    """
    found = tuple(f.name for f in dataclasses.fields(cls))
    if found != names:
        raise ImportError(
            f"{cls.__name__} fields changed: {found} (the row builder expects {names})"
        )


def positional_builder(cls: type[T]) -> Callable[..., T]:
    """``build(*values)``: an instance of frozen, slotted dataclass ``cls`` from every field.

    ``values`` are all the fields, in ``dataclasses.fields(cls)`` order; nothing
    is converted or defaulted (the row mappers pass exactly what the class's
    own constructor would store).
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass")
    names = tuple(f.name for f in dataclasses.fields(cls))
    slots = getattr(cls, "__slots__", None)
    if (
        cls.__bases__ != (object,)
        or "__slots__" not in vars(cls)
        or "__dict__" in (slots or ())
        or hasattr(cls, "__post_init__")
        or any(f.init is False for f in dataclasses.fields(cls))
    ):
        raise TypeError(f"{cls.__name__}: no positional builder for this dataclass")
    # The twin: a plain class of the same layout. Only its stores run; an
    # instance never leaves build() as a twin.
    twin = type(f"_{cls.__name__}Slots", (), {"__slots__": slots, "__module__": __name__})
    params = ", ".join(names)
    body = "".join(f"    o.{name} = {name}\n" for name in names)
    source = (
        f"def build({params}):\n    o = _new(_twin)\n{body}    o.__class__ = _cls\n    return o\n"
    )
    scope: dict[str, Any] = {"_new": object.__new__, "_twin": twin, "_cls": cls}
    exec(source, scope)  # noqa: S102 - the source is built from the dataclass's field names
    build: Callable[..., T] = scope["build"]
    _check(cls, names, build)
    return build


def _check(cls: type[Any], names: tuple[str, ...], build: Callable[..., Any]) -> None:
    """The builder's object equals, hashes and prints as the class's own (else ``TypeError``)."""
    values = [object() for _ in names]  # distinct markers: a swapped slot shows
    try:
        built = build(*values)
    except TypeError as error:  # the layouts differ after all
        raise TypeError(f"{cls.__name__}: no positional builder ({error})") from None
    own = cls(**dict(zip(names, values, strict=True)))
    if (
        type(built) is not cls
        or built != own
        or any(getattr(built, name) is not value for name, value in zip(names, values, strict=True))
        or repr(built) != repr(own)
    ):
        raise TypeError(f"{cls.__name__}: the positional builder does not match the class")

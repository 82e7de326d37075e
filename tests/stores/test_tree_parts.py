"""Message parts: ordered text and image parts, hydration, limits.

See docs/tree-store.md, "Messages and parts".
"""

from __future__ import annotations

import pytest

from agentstore import exceptions
from agentstore.models import Entry, MessagePart
from agentstore.stores.tree import TreeStore
from agentstore.stores.tree_parts import MAX_IMAGE_BYTES
from agentstore.types.tree import MessageEntity, MessagePartEntity
from tests.stores.conftest import assistant, user

pytestmark = pytest.mark.django_db


def text(value: str) -> MessagePartEntity:
    return MessagePartEntity(type="text", text=value)


def image(
    data: bytes = b"\x01", mime: str = "image/png", w: int = 1, h: int = 1, **kw: object
) -> MessagePartEntity:  # noqa: E501
    return MessagePartEntity(type="image", data=data, mime_type=mime, width=w, height=h, **kw)  # type: ignore[arg-type]


PARTS = (
    text("compare these"),
    image(bytes([1, 2, 3]), "image/png", 10, 20, name="first.png"),
    image(bytes([4, 5]), "image/jpeg", 30, 40, name="second.jpg"),
)


def test_round_trips_ordered_multipart_messages(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    buffer = bytearray([1, 2, 3])
    parts = (
        text("compare these"),
        image(bytes(buffer), "image/png", 10, 20, name="first.png"),
        PARTS[2],
    )
    entry = tree.append_message(session.id, None, user("compare these", parts=parts))
    buffer[0] = 99  # the caller reuses its buffer; the stored bytes must not change

    readers = {
        "append": entry.message.parts,
        "messages": tree.messages(session.id)[0].parts,
        "transcript": tree.transcript_messages(session.id)[0].parts,
        "message_for_entry": tree.message_for_entry(session.id, entry.id).parts,  # type: ignore[union-attr]
        "branch": tree.branch(session.id, entry.id)[0].message.parts,
        "entries": tree.entries(session.id)[0].message.parts,
        "entry": tree.entry(session.id, entry.id).message.parts,  # type: ignore[union-attr]
        "leaf_entry": tree.leaf_entry(session.id).message.parts,  # type: ignore[union-attr]
        "children": tree.children(session.id, None)[0].message.parts,
        "tree": tree.tree(session.id)[0].entry.message.parts,
        "context": tree.build_context(session.id, entry.id).messages[0].parts,
    }
    for name, found in readers.items():
        assert found == PARTS, name
    assert MessagePart.objects.count() == 3


def test_context_has_image_parts_follows_the_active_branch(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    root = tree.append_message(session.id, None, user("root"))
    pic = tree.append_message(session.id, root.id, MessageEntity(role="user", parts=(image(),)))
    leaf = tree.append_message(session.id, pic.id, assistant("seen"))
    sibling = tree.append_message(session.id, root.id, user("other way"))

    assert tree.context_has_image_parts(session.id, leaf.id)
    assert tree.context_has_image_parts(session.id, pic.id)
    assert not tree.context_has_image_parts(session.id, root.id)
    assert not tree.context_has_image_parts(session.id, sibling.id)
    assert not tree.context_has_image_parts(session.id, "missing")


def test_image_only_and_legacy_text(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    legacy = tree.append_message(session.id, None, user("legacy text"))
    pic = tree.append_message(
        session.id, legacy.id, MessageEntity(role="user", parts=(image(bytes([7])),))
    )

    assert tree.entry(session.id, legacy.id).message.parts == (text("legacy text"),)  # type: ignore[union-attr]
    stored = tree.entry(session.id, pic.id)
    assert stored is not None and stored.message.content == ""
    assert [p.type for p in stored.message.parts] == ["image"]
    context = tree.build_context(session.id, pic.id)
    assert len(context.messages) == 2
    assert context.messages[1].content == "" and context.messages[1].parts[0].data == bytes([7])
    # A non-message entry carries no parts at all.
    change = tree.append_model_change(session.id, pic.id, "p", "m")
    assert tree.entry(session.id, change.id).message.parts == ()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("content", "parts", "error"),
    [
        ("", tuple(image() for _ in range(5)), "maximum is 4"),
        ("different", (text("text"),), "content must match the text projection"),
        ("", (MessagePartEntity(type="audio", data=b"x"),), "unsupported message part type"),
        (" \t", (text(" \t"),), "text part must have text"),
        ("t", (MessagePartEntity(type="text", text="t", data=b"x"),), "must not have binary data"),
        ("", (image(b""),), "image part must have binary data"),
        ("", (image(text="caption"),), "image part must not have text"),
        ("", (image(mime="image/*"),), "normalized image MIME type"),
        ("", (image(mime="Image/PNG"),), "normalized image MIME type"),
        ("", (image(mime="image/png; q=1"),), "normalized image MIME type"),
        ("", (image(mime="text/plain"),), "normalized image MIME type"),
        ("", (image(b"x" * (MAX_IMAGE_BYTES + 1)),), "5 MiB limit"),
        ("", (image(w=0),), "dimensions must be positive"),
        ("", (image(h=0),), "dimensions must be positive"),
        ("", (image(w=40_000_001, h=1),), "40 megapixels"),
        ("", tuple(image(b"x" * MAX_IMAGE_BYTES) for _ in range(4)) + (), None),
    ],
)
def test_rejects_invalid_multipart_messages(
    tree: TreeStore, content: str, parts: tuple[MessagePartEntity, ...], error: str | None
) -> None:
    session = tree.create_session("/w")
    message = MessageEntity(role="user", content=content, parts=parts)
    if error is None:
        # Exactly at the limits (4 images of 5 MiB = 20 MiB) is accepted.
        tree.append_message(session.id, None, message)
        return
    with pytest.raises(exceptions.ValidationError, match=error) as info:
        tree.append_message(session.id, None, message)
    assert info.value.field.startswith("message.")
    assert not Entry.objects.exists() and not MessagePart.objects.exists()


def test_too_much_image_data_in_one_message(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    big = image(b"x" * MAX_IMAGE_BYTES)
    tiny = image(b"x")
    # 4 × 5 MiB + 1 byte over four images is impossible; five would break the count first,
    # so check the total with images at the limit plus a fifth only via the total rule.
    from agentstore.stores import tree_parts

    original = tree_parts.MAX_IMAGES
    tree_parts.MAX_IMAGES = 5
    try:
        with pytest.raises(exceptions.ValidationError, match="20 MiB limit"):
            tree.append_message(
                session.id, None, MessageEntity(role="user", parts=(big, big, big, big, tiny))
            )
    finally:
        tree_parts.MAX_IMAGES = original
    assert not Entry.objects.exists()


def test_part_insert_failure_rolls_back_the_entry(
    tree: TreeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = tree.create_session("/w")
    from agentstore.sql import tree as tree_sql

    monkeypatch.setattr(
        tree_sql, "INSERT_PART", tree_sql.INSERT_PART.replace("messagepart", "nopart")
    )
    with pytest.raises(Exception, match="nopart"):
        tree.append_message(session.id, None, user("a", parts=(text("a"),)))
    assert not Entry.objects.exists()


def test_parts_cascade_with_entry_and_session(tree: TreeStore) -> None:
    first = tree.create_session("/w")
    second = tree.create_session("/w")
    a = tree.append_message(first.id, None, MessageEntity(role="user", parts=(image(),)))
    tree.append_message(second.id, None, MessageEntity(role="user", parts=(image(),)))
    assert MessagePart.objects.count() == 2

    tree.delete_entry_branch(first.id, a.id)
    assert MessagePart.objects.count() == 1

    tree.delete_session(second.id)
    assert MessagePart.objects.count() == 0

"""Validation of a message before it is written: role, sender, text and image parts.

Everything is checked before the write transaction opens, so a bad part
persists nothing (docs/tree-store.md, "Messages and parts")::

    validate_message(message, entry_type="message", custom_type="")

Limits: at most 4 images and 20 MiB of image data per message; each image
≤ 5 MiB, with a normalised ``image/<subtype>`` MIME type and positive
dimensions of at most 40 megapixels; text parts need text; when parts are given
the message content must equal the concatenation of the text parts.
"""

from __future__ import annotations

import re

from agentstore.exceptions import ValidationError
from agentstore.types.tree import MessageEntity, MessagePartEntity

__all__ = [
    "MAX_IMAGES",
    "MAX_IMAGE_BYTES",
    "MAX_IMAGE_PIXELS",
    "MAX_MESSAGE_IMAGE_BYTES",
    "message_sender",
    "text_projection",
    "validate_message",
]

MAX_IMAGES = 4
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_MESSAGE_IMAGE_BYTES = 20 * 1024 * 1024
MAX_IMAGE_PIXELS = 40_000_000

# type "/" subtype, lower case, no wildcard, no parameters.
_MIME = re.compile(r"^image/[a-z0-9][a-z0-9!#$&^_.+-]*$")


def message_sender(role: str, custom_type: str) -> str:
    """Who sent a message: the custom type for custom messages, else the role."""
    if role == "custom" and custom_type != "":
        return custom_type
    return role


def text_projection(parts: tuple[MessagePartEntity, ...]) -> str:
    return "".join(part.text for part in parts if part.type == "text")


def _part_error(index: int, message: str) -> ValidationError:
    field = f"message.parts[{index}]"
    return ValidationError(f"{field}: {message}", field=field)


def _validate_part(index: int, part: MessagePartEntity) -> None:
    if part.type == "text":
        if not part.text.strip():
            raise _part_error(index, "text part must have text")
        if part.data:
            raise _part_error(index, "text part must not have binary data")
        return
    if part.type == "image":
        if not part.data:
            raise _part_error(index, "image part must have binary data")
        if part.text:
            raise _part_error(index, "image part must not have text")
        if not _MIME.match(part.mime_type):
            raise _part_error(index, "image part must have a normalized image MIME type")
        if len(part.data) > MAX_IMAGE_BYTES:
            raise _part_error(index, "image part exceeds the 5 MiB limit")
        if part.width <= 0 or part.height <= 0 or part.width * part.height > MAX_IMAGE_PIXELS:
            raise _part_error(
                index, "image part dimensions must be positive and at most 40 megapixels"
            )
        return
    raise _part_error(index, f"unsupported message part type {part.type!r}")


def validate_message(message: MessageEntity | None, *, custom_type: str = "") -> None:
    """Raise ``ValidationError`` naming the first thing wrong with ``message``."""
    if message is None:
        raise ValidationError("message is required", field="message")
    if not message.role.strip():
        raise ValidationError("message.role is required", field="message.role")
    if not message_sender(message.role, custom_type).strip():
        raise ValidationError("message.sender is required", field="message.sender")
    parts = tuple(message.parts)
    images = 0
    image_bytes = 0
    for index, part in enumerate(parts):
        if not isinstance(part, MessagePartEntity):
            raise _part_error(index, "must be a MessagePartEntity")
        _validate_part(index, part)
        if part.type == "image":
            images += 1
            image_bytes += len(part.data)
    if images > MAX_IMAGES:
        raise ValidationError(
            f"message has {images} images; maximum is {MAX_IMAGES}", field="message.parts"
        )
    if image_bytes > MAX_MESSAGE_IMAGE_BYTES:
        raise ValidationError("message image data exceeds the 20 MiB limit", field="message.parts")
    if parts and message.content != text_projection(parts):
        raise ValidationError(
            "message.content must match the text projection of message.parts",
            field="message.content",
        )

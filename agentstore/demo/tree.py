"""Demo data of the tree store: a session with branches, a compaction and an image.

    from agentstore.demo import tree
    for line in tree.seed(owner):
        print(line)

Everything goes through :class:`agentstore.stores.TreeStore`. Safe to run again:
the session is found by its name and left alone when it exists.
"""

from __future__ import annotations

import base64
from typing import Any

from agentstore.models import Session
from agentstore.stores import TreeStore
from agentstore.types import AppendCompactionInput, EntryTokenUsageEntity, MessageEntity
from agentstore.types import MessagePartEntity as Part

NAME = "Demo: fix the flaky parser test"
CWD = "/demo/parser"
# A 1×1 PNG, so the image part is a real image.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def seed(owner: Any) -> list[str]:
    """Create the demo tree session (once) and return lines describing it."""
    existing = Session.objects.filter(kind="tree", name=NAME).first()
    if existing is not None:
        return [f"Kept tree session {existing.id} ({NAME!r})"]

    store = TreeStore()
    session = store.create_session(CWD, NAME, owner=owner)
    sid = session.id

    def msg(role: str, content: str, **kwargs: Any) -> MessageEntity:
        return MessageEntity(role=role, content=content, **kwargs)

    ask = store.append_message(
        sid,
        None,
        msg(
            "user",
            "test_parse_dates fails one run in ten. Here is the CI screenshot.",
            parts=(
                Part(type="text", text="test_parse_dates fails one run in ten. "),
                Part(type="text", text="Here is the CI screenshot."),
                Part(
                    type="image",
                    mime_type="image/png",
                    name="ci.png",
                    data=PIXEL,
                    width=1,
                    height=1,
                ),
            ),
        ),
    )
    model = store.append_model_change(sid, ask.id, "anthropic", "claude-sonnet")
    think = store.append_thinking_level_change(sid, model.id, "high")
    look = store.append_message(
        sid,
        think.id,
        msg(
            "assistant", "Let me read the test first.", provider="anthropic", model="claude-sonnet"
        ),
        usage=EntryTokenUsageEntity(
            context_window=200_000, context_tokens=1_850, input_tokens=1_850, output_tokens=42
        ),
    )
    read = store.append_message(
        sid,
        look.id,
        msg(
            "toolResult",
            'tool: read\narguments: {"path": "tests/test_parse.py"}\noutput:\n'
            "def test_parse_dates():\n    assert parse(now()) == today()\n",
        ),
    )
    cause = store.append_message(
        sid,
        read.id,
        msg(
            "assistant",
            "The test compares against today() and fails when it runs across midnight UTC.",
            provider="anthropic",
            model="claude-sonnet",
        ),
    )
    store.append_label_change(sid, cause.id, cause.id, "root cause")
    # Branch A: freeze the clock.
    fix = store.append_message(sid, cause.id, msg("user", "Freeze the clock in the test."))
    done = store.append_message(
        sid,
        fix.id,
        msg(
            "assistant",
            "Done: the test now injects a fixed clock.",
            provider="anthropic",
            model="claude-sonnet",
        ),
    )
    compaction = store.append_compaction(
        AppendCompactionInput(
            session_id=sid,
            parent_id=done.id,
            summary="The flaky test compared parse(now()) with today(); fixed with a clock.",
            first_kept_entry_id=fix.id,
            tokens_before=2_400,
            operation_id=f"demo-compaction-{sid}",
        )
    )
    store.append_message(sid, compaction.id, msg("user", "Also add a regression test at 23:59:59."))
    # Branch B (abandoned): retry on failure, summarised back into branch A.
    retry = store.append_message(sid, cause.id, msg("user", "Could we just retry the test?"))
    store.append_message(sid, retry.id, msg("assistant", "Retrying hides the bug; I would not."))
    store.append_branch_summary(
        sid,
        done.id,
        retry.id,
        "Considered retrying the flaky test; rejected as hiding the bug.",
        None,
        False,
    )
    store.append_session_info(sid, compaction.id, NAME)
    child = store.create_session(CWD, "Demo: write the regression test", sid, owner=owner)
    store.append_message(child.id, None, msg("user", "Write test_parse_dates_at_midnight."))
    entries = len(store.entries(sid))
    return [
        f"Created tree session {sid} ({NAME!r}: {entries} entries, 2 branches, "
        "a compaction, an image message) and child session " + child.id,
    ]

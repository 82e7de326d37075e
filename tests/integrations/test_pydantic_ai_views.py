"""A Pydantic AI conversation reads like a conversation on every page and in ``show``.

A real agent run (``FunctionModel``, offline: ``pydantic_fakes``) with a system
prompt, instructions, thinking, text beside a tool call, a refused call and its
validation errors, the corrected call, the tool's return and the answer, saved
through ``MessageHistory``; then the admin's tree, transcript and context view
and ``manage.py agentstore show`` are read as a person reads them: roles, texts,
tool calls with their arguments and ids, and returns — never raw JSON. The
context view lists exactly the history ``load()`` returns. Older histories'
``retry-prompt`` parts and multimodal user prompts read too.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from pydantic_ai.messages import (
    ImageUrl,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryInfo,
    RetryPromptPart,
    TextPart,
    UserPromptPart,
)

from agentstore.formats.agentsession.describe import describe, items_of
from agentstore.integrations.pydantic_ai import ENTRY_TYPE, MessageHistory
from agentstore.models import Entry
from tests.commands.test_agentstore_command import run
from tests.integrations.pydantic_fakes import thoughtful_weather_agent

pytestmark = pytest.mark.django_db(transaction=True)

SID = "weather-pydantic"


def url(name: str, *args: str) -> str:
    return reverse(f"admin:agentstore_session_{name}", args=args)


def text_of(page: str, anchor: str) -> str:
    """The visible text of a page from ``anchor`` on, whitespace collapsed."""
    body = re.sub(r"</?code[^>]*>", "", page[page.index(anchor) :])  # inline: no space
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


@pytest.fixture
def conversation() -> list[Any]:
    with MessageHistory(SID) as history:
        result = thoughtful_weather_agent().run_sync(
            "Weather in Paris?", message_history=history.load()
        )
        history.save(result)
    return result.all_messages()


#: What a person must read, in this order, on the tree, the transcript and the context.
READS = [
    "message system You are a weather bot.",
    "message user Weather in Paris?",
    "reasoning The user wants the weather; the tool knows it.",
    "message assistant Let me look that up.",
    'get_weather({"town": "Paris"})',
    "[bad__Paris]",
    "city: Field required",  # the validation errors the refused call got back
    'get_weather({"city": "Paris"})',
    "[good_Paris]",
    "sunny, 21°C",
    "In Paris it is sunny, 21°C.",
]


def in_order(text: str, wanted: list[str]) -> None:
    at = 0
    for words in wanted:
        found = text.find(words, at)
        assert found >= 0, f"{words!r} not found after position {at} in: {text[at : at + 400]}"
        at = found + len(words)


def no_raw_json(text: str) -> None:
    assert '"part_kind"' not in text and "part_kind" not in text
    assert '"parts"' not in text and "tool_call_id" not in text


def test_tree_shows_roles_texts_calls_and_returns(
    admin_client: Client, conversation: list[Any]
) -> None:
    page = admin_client.get(url("tree", SID)).content.decode()
    tree = text_of(page, 'id="entry-tree"')
    in_order(tree, READS)
    assert "model request user" in tree and "model response assistant" in tree
    assert "instructions “Answer about the weather.”" in tree
    assert "59 in / 21 out tokens" in tree  # the response's usage
    assert "outcome retried" in tree
    no_raw_json(tree)
    assert 'role-system">system' in page and 'role-user">user' in page


def test_transcript_lists_every_part(admin_client: Client, conversation: list[Any]) -> None:
    page = admin_client.get(url("transcript", SID)).content.decode()
    transcript = text_of(page, 'id="transcript"')
    assert "No items." not in transcript
    in_order(transcript, READS)
    no_raw_json(transcript)
    rows = page[page.index('id="transcript"') :]
    rows = rows[: rows.index("</table>")]
    # One row per part: 2 + 3 + 1 + 1 + 1 + 1 of the run's six messages.
    assert rows.count("<tr>") == sum(len(m.parts) for m in conversation) == 9


def test_context_is_the_history_load_returns(admin_client: Client, conversation: list[Any]) -> None:
    page = admin_client.get(url("context", SID)).content.decode()
    context = text_of(page, 'id="context-messages"')
    assert "No input items" not in context
    in_order(context, READS)
    assert "Pydantic AI message history (what MessageHistory.load() returns)" in context
    rows = page[page.index('id="context-messages"') :]
    rows = rows[: rows.index("</table>")]
    loaded = MessageHistory(SID).load()
    assert loaded == conversation
    assert rows.count("<tr>") == 1 + sum(len(m.parts) for m in loaded)
    # At an earlier entry: the history up to it, as load() saw it then.
    second = Entry.objects.get(session_id=SID, type=ENTRY_TYPE, seq=3).entry_id
    early = admin_client.get(url("context", SID), {"entry": second}).content.decode()
    early_text = text_of(early, 'id="context-messages"')
    assert "Weather in Paris?" in early_text and "Let me look that up." in early_text
    assert "sunny, 21°C" not in early_text


def test_show_reads_like_a_conversation(conversation: list[Any]) -> None:
    out, _ = run("show", SID)
    for words in (
        "system: You are a weather bot. | user: Weather in Paris?",
        "(thinking) The user wants the weather",
        "assistant: Let me look that up.",
        'get_weather({"town": "Paris"}) [bad__Paris]',
        "[bad__Paris] → city: Field required",
        'get_weather({"city": "Paris"}) [good_Paris]',
        "[good_Paris] → sunny, 21°C",
        "assistant: In Paris it is sunny, 21°C.",
    ):
        assert words in out, (words, out)
    assert '"parts"' not in out and "part_kind" not in out  # no raw JSON
    leaf = Entry.objects.filter(session_id=SID).order_by("-seq").first()
    assert leaf is not None
    document = json.loads(run("show", SID, "--leaf", leaf.entry_id, "--json")[0])
    summaries = [i["summary"] for i in document["context"]["items"]]
    assert summaries[:2] == ["system: You are a weather bot.", "user: Weather in Paris?"]
    assert summaries[-1] == "assistant: In Paris it is sunny, 21°C."
    assert len(summaries) == sum(len(m.parts) for m in conversation)


# RetryPromptPart is deprecated in Pydantic AI 2; histories saved before still hold it.
@pytest.mark.filterwarnings("ignore:.*RetryPromptPart")
def test_retry_prompts_old_and_new_and_media_read_too(admin_client: Client) -> None:
    messages = [
        ModelRequest(
            parts=[UserPromptPart(["What is in this picture?", ImageUrl("https://x.test/cat.png")])]
        ),
        ModelRequest(
            parts=[
                RetryPromptPart(
                    [{"type": "missing", "loc": ("city",), "msg": "Field required", "input": {}}],
                    tool_name="get_weather",
                    tool_call_id="call_9",
                ),
                RetryPromptPart("Please answer in French."),
                RetryFeedbackPart(
                    "The answer must name an animal.", retry=RetryInfo(cause="model_retry")
                ),
            ]
        ),
        ModelResponse(parts=[TextPart("Un chat.")]),
    ]
    with MessageHistory("legacy") as history:
        history.save(messages)
    views = [
        part
        for line in Entry.objects.filter(session_id="legacy").order_by("seq")
        for part in items_of(describe(json.loads(line.line)))
    ]
    assert [(v.kind, v.role) for v in views] == [
        ("message", "user"),
        ("retry prompt", ""),
        ("retry prompt", "user"),
        ("retry prompt", "user"),
        ("message", "assistant"),
    ]
    assert views[0].text == "What is in this picture?\n[image]"
    assert views[1].text == "city: Field required" and views[1].call_id == "call_9"
    assert views[2].text == "Please answer in French."
    assert views[3].text == "The answer must name an animal." and views[3].detail == "model retry"
    page = text_of(admin_client.get(url("transcript", "legacy")).content.decode(), "transcript")
    in_order(
        page,
        [
            "What is in this picture? [image]",
            "city: Field required",
            "Please answer in French.",
            "The answer must name an animal.",
            "Un chat.",
        ],
    )
    out, _ = run("show", "legacy")
    assert "(retry [call_9]) city: Field required | (retry) Please answer in French." in out


def test_entries_project_their_words_for_search_and_lists(conversation: list[Any]) -> None:
    rows = list(
        Entry.objects.filter(session_id=SID)
        .order_by("seq")
        .values_list("role", "content", "tool_name")
    )
    assert rows[0] == ("user", "You are a weather bot.\nWeather in Paris?", "")
    assert rows[1][0] == "assistant" and "Let me look that up." in rows[1][1]
    assert rows[2] == ("", "city: Field required\ntown: Extra inputs are not permitted", "")
    assert rows[3] == ("", 'get_weather({"city": "Paris"})', "get_weather")
    assert rows[-1] == ("assistant", "In Paris it is sunny, 21°C.", "")

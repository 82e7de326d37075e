"""Hostile values at the ``django.tasks`` door: refused at enqueue, as the HTTP API refuses them.

The API's strict parser refuses NaN/Infinity/``1e999``, NUL and lone surrogates,
nesting past ``JSON_MAX_DEPTH`` and bodies past ``DATA_UPLOAD_MAX_MEMORY_SIZE``;
``AgentStoreBackend.enqueue`` applies the same rules (``agentstore.validation``)
and refuses — rather than silently converts — what JSON would not read back
unchanged (bytes, tuples, sets, non-string keys). Arguments raise
``InvalidTaskArguments`` (a ``ValidationError``, ``ValueError`` and
``TypeError``); task properties (queue name, ``max_attempts``) raise the
framework's ``InvalidTask``. Nothing is written either way.
"""

from __future__ import annotations

import asyncio
import dataclasses
import decimal
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import override_settings

from agentstore.exceptions import InvalidTaskArguments, ValidationError
from agentstore.models import FunctionTask, Task
from agentstore.tasks import TaskRepository
from agentstore.tasks.framework import framework
from agentstore.tasks.worker import TaskWorker
from agentstore.types import TaskEntity
from tests.tasks import jobs

pytestmark = pytest.mark.django_db(transaction=True)

assert framework is not None
Status = framework.TaskResultStatus


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def cycle() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


HOSTILE_ARGS: dict[str, tuple[tuple[Any, ...], dict[str, Any], str]] = {
    "nan": ((float("nan"),), {}, "args[0] is nan"),
    "infinity": ((float("inf"),), {}, "args[0] is inf"),
    "1e999": ((1e999,), {}, "args[0] is inf"),
    "nested -infinity": ((), {"x": {"y": [float("-inf")]}}, "kwargs['x']['y'][0] is -inf"),
    "lone surrogate": (("a\ud800b",), {}, "args[0] contains a lone surrogate"),
    "surrogate key": (({"\udfff": 1},), {}, "args[0] has a key that contains a lone surrogate"),
    "NUL": (("a\x00b",), {}, "args[0] contains a NUL character"),
    "NUL key": ((), {"x": {"a\x00": 1}}, "kwargs['x'] has a key that contains a NUL"),
    "NUL kwarg name": ((), {"a\x00b": 1}, "kwargs has a key that contains a NUL"),
    "bytes": ((b"x",), {}, "args[0] is bytes"),
    "bytearray": ((bytearray(b"x"),), {}, "args[0] is bytes"),
    "tuple": (((1, 2),), {}, "args[0] is a tuple"),
    "nested tuple": (([1, (2,)],), {}, "args[0][1] is a tuple"),
    "set": (({1},), {}, "args[0] is a set"),
    "int key": (({1: "a"},), {}, "args[0] has the key 1"),
    "tuple key": (({(1, 2): "a"},), {}, "args[0] has the key (1, 2)"),
    "object": ((object(),), {}, "args[0] is a object"),
    "decimal": ((decimal.Decimal("1.5"),), {}, "args[0] is a Decimal"),
    "datetime": ((datetime(2026, 1, 1, tzinfo=UTC),), {}, "args[0] is a datetime"),
    "uuid": ((uuid.uuid4(),), {}, "args[0] is a UUID"),
    "too deep": ((nested(100),), {}, "nests deeper than 100 levels"),
    "a value that contains itself": ((cycle(),), {}, "nests deeper than 100 levels"),
}


def nothing_written(before: int) -> None:
    assert Task.objects.count() == before
    assert FunctionTask.objects.count() == before


@pytest.mark.parametrize("name", list(HOSTILE_ARGS))
def test_hostile_arguments_are_refused_before_anything_is_written(name: str) -> None:
    args, kwargs, said = HOSTILE_ARGS[name]
    before = Task.objects.count()
    with pytest.raises(InvalidTaskArguments) as info:
        jobs.add.enqueue(*args, **kwargs)
    assert said in str(info.value)
    error = info.value
    # What django.tasks users catch (TypeError/ValueError) and agentstore's own error.
    assert isinstance(error, TypeError) and isinstance(error, ValueError)
    assert isinstance(error, ValidationError) and error.code == "invalid_task_arguments"
    assert error.field in ("args", "kwargs")
    nothing_written(before)


def test_aenqueue_refuses_them_too() -> None:
    with pytest.raises(InvalidTaskArguments):
        asyncio.run(jobs.add.aenqueue(float("nan"), 1))
    nothing_written(0)


def test_arguments_past_the_api_body_limit_are_refused() -> None:
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1_000):
        fits = "x" * (1_000 - len(json.dumps({"args": ["", ""], "kwargs": {}})))
        jobs.noop.enqueue()
        accepted = jobs.add.enqueue(fits, "")
        with pytest.raises(InvalidTaskArguments, match="DATA_UPLOAD_MAX_MEMORY_SIZE"):
            jobs.add.enqueue(fits + "x", "")
        # Non-ASCII text is stored escaped: the bound is on the stored bytes.
        with pytest.raises(InvalidTaskArguments, match="more than 1000"):
            jobs.add.enqueue("é" * 200, "")
    stored = FunctionTask.objects.get(pk=accepted.id).arguments_json
    assert len(stored.encode()) == 1_000
    assert Task.objects.count() == 2


def test_a_hundred_megabytes_is_refused_at_the_default_limit() -> None:
    big = "x" * (100 * 1024 * 1024)
    with pytest.raises(InvalidTaskArguments, match="2621440"):
        jobs.add.enqueue(big, "")
    nothing_written(0)


def test_json_values_still_round_trip() -> None:
    args = ("é😀 text", 10**30, -0.5, True, None, [1, [2, {"k": "v"}]], nested(98))
    kwargs = {"b": {"nested": {"list": [1.25, False]}}, "ünïcode": "ok"}
    result = jobs.add.enqueue(*args, **kwargs)
    fetched = jobs.add.get_result(result.id)
    assert fetched.args == list(args)
    assert fetched.kwargs == kwargs


HOSTILE_QUEUES = ["a\x00b", "a\nb", "a/b", "a\\b", "a\ud800", "", "  ", "..", "q" * 65]


@pytest.mark.parametrize("queue", HOSTILE_QUEUES)
def test_hostile_queue_names_are_invalid_tasks(queue: str) -> None:
    with pytest.raises(framework.InvalidTask) as info:
        jobs.add.using(queue_name=queue).enqueue(1, 2)
    cause = info.value.__cause__
    assert isinstance(cause, ValidationError) and cause.field == "task.queue_name"
    nothing_written(0)


def test_a_hostile_queue_name_is_refused_at_task_definition() -> None:
    with pytest.raises(framework.InvalidTask, match="task.queue_name"):
        framework.task(queue_name="mail\x00")(jobs.add.func)


@pytest.mark.parametrize("attempts", [-1, 2**31, "3", 2.5, True])
def test_bad_max_attempts_are_invalid_tasks(attempts: Any) -> None:
    with pytest.raises(framework.InvalidTask, match="task.max_attempts"):
        dataclasses.replace(jobs.add, max_attempts=attempts).enqueue(1, 2)
    nothing_written(0)


@pytest.mark.parametrize("queue", ["a\x00b", "a/b", "a\ud800", "q" * 65])
def test_the_repository_applies_the_same_queue_rule(queue: str) -> None:
    with pytest.raises(ValidationError) as info:
        TaskRepository().enqueue(TaskEntity(kind="report", queue_name=queue))
    assert info.value.field == "task.queue_name"
    assert Task.objects.count() == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [("priority", 101), ("priority", 1.5), ("max_attempts", -1), ("max_attempts", 2**31)],
)
def test_the_repository_refuses_out_of_range_numbers(field: str, value: Any) -> None:
    with pytest.raises(ValidationError) as info:
        TaskRepository().enqueue(TaskEntity(kind="report", **{field: value}))
    assert info.value.field == f"task.{field}"
    assert Task.objects.count() == 0


def test_a_nan_return_value_fails_the_task() -> None:
    result = jobs.returns.enqueue("nan")
    TaskWorker(once=True).run()
    result.refresh()
    assert result.status == Status.FAILED
    assert "not JSON" in result.errors[0].traceback
    task = TaskRepository().get(result.id)
    assert task is not None and task.result == ""
    assert json.loads(FunctionTask.objects.get(pk=result.id).arguments_json) == {
        "args": ["nan"],
        "kwargs": {},
    }

"""Value objects the stores take and return: frozen dataclasses with the Go fields in snake_case.

    from agentstore.types import RunStep, TaskEntity, TaskClaim

One submodule per area; everything is re-exported here.
"""

from __future__ import annotations

from agentstore.types.log import *  # noqa: F403
from agentstore.types.loop import *  # noqa: F403
from agentstore.types.sessions import *  # noqa: F403
from agentstore.types.tasks import *  # noqa: F403
from agentstore.types.tree import *  # noqa: F403

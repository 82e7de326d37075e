"""The test runners' names and paths (``AGENTSTORE["RUNNERS"]``), importable from settings.

Nothing else here: worker settings import it before Django's apps are ready.
"""

from __future__ import annotations

RUNNERS = {
    "echo": "tests.runs.runners.echo",
    "aecho": "tests.runs.runners.aecho",
    "say": "tests.runs.runners.say",
    "fails": "tests.runs.runners.fails",
    "not_json": "tests.runs.runners.not_json",
    "outsider": "tests.runs.runners.outsider",
    "killable": "tests.runs.runners.killable",
    "nul": "tests.runs.runners.nul",
    "sdk_weather": "tests.runs.runners.sdk_weather",
}

"""The parts of :class:`agentstore.tasks.repository.TaskRepository`, one module each.

Import the repository from ``agentstore.tasks``; these modules hold its parts,
each named for what it does (``claims``, ``leases``, ``settling``, ``events``,
``expired`` …), and ``agentstore.tasks.repository`` composes them and explains
how the parts fit ("How exclusivity works", "Where each part lives")::

    from agentstore.tasks import TaskRepository

The agent, tool and workflow repositories import the shared words from
``vocabulary`` and the crash helpers from ``expired``.
"""

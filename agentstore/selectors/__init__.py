"""Read helpers shared by the REST API and the admin: plain functions over querysets.

Selectors read, stores write (HackSoftware's services/selectors split). Each one
takes the requesting user where visibility matters, so the API and the admin
agree on who sees what::

    from agentstore.selectors.sessions import sessions_visible_to

    mine = sessions_visible_to(request.user).newest_first()
"""

from __future__ import annotations

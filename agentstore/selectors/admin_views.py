"""Read helpers behind the admin's inspection pages (reusable by the API).

    from agentstore.selectors.admin_views import session_overview, session_tree

    overview = session_overview(session_id)      # header facts, hold, refs, children
    tree = session_tree(session_id)              # the whole entry tree, one query
    rows = tree_rows(tree)                       # flattened for rendering, runs collapsed

Everything here *reads*; the admin's actions call the stores and task
repositories directly. Where a store already answers a question
(``TreeStore.build_context``, ``TreeStore.transcript_messages``,
``LoopStore.steps``/``grants``, the task repositories' ``get``/``list_events``)
these helpers call it instead of querying again.

The one query written here rather than taken from a store is the *tree read*
(:func:`session_tree`): ``TreeStore.tree`` hydrates every entry in full (JSON
line, content, message parts) and builds the nesting recursively, which is the
right contract for Python callers but too heavy for drawing a 10,000-entry
session — and a recursive build cannot descend a 10,000-deep chain. The tree
view needs a narrow projection (no parts, content cut to a preview, the JSON
line only for labels, thinking-level changes and session info) read once in
``seq`` order and nested iteratively.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Case, Count, Q, TextField, Value, When
from django.db.models.functions import Cast, Substr

from agentstore import sql
from agentstore.conf import agentstore_settings
from agentstore.db import read_only
from agentstore.exceptions import TooLarge
from agentstore.models import Entry, Grant, Holder, Ref, Session, Step, Task
from agentstore.models.tasks import LEASED_STATES, TaskState
from agentstore.selectors.holds import HoldInfo, hold_of
from agentstore.stores.tree import TreeStore
from agentstore.types.tree import EntryEntity, MessageEntity, SessionContextEntity

__all__ = [
    "PREVIEW_CHARS",
    "ContextLine",
    "ContextView",
    "Dashboard",
    "SessionOverview",
    "SessionTree",
    "TreeNode",
    "TreeRow",
    "context_view",
    "dashboard",
    "expired_leases",
    "session_overview",
    "session_tree",
    "steps_of",
    "tree_rows",
]

#: Characters of content/summary the tree shows per entry.
PREVIEW_CHARS = 120
#: Children listed on a session page (the rest are one filtered changelist away).
CHILDREN_SHOWN = 50

MESSAGE_TYPES = frozenset({"message", "custom_message"})
# Entry types whose JSON line the tree needs (label target, thinking level, name).
_LINE_TYPES = ("label", "thinking_level_change", "session_info")


# -- session page ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionOverview:
    """The header facts of one session and what points at it."""

    id: str
    kind: str
    name: str
    cwd: str
    owner: str
    model: str
    status: str
    prompt_tokens: int
    completion_tokens: int
    created_at: datetime
    updated_at: datetime
    parent_session: str
    parent_exists: bool
    superseded_by: str
    entry_count: int
    step_count: int
    grant_count: int
    children: tuple[tuple[str, str, str], ...]  # (id, kind, name), newest first
    child_count: int
    refs: tuple[tuple[str, str], ...]  # (name, pinned entry id)
    hold: HoldInfo | None
    tasks_by_state: tuple[tuple[str, int], ...]
    agent_task_id: str  # the agent task that runs *in* this session, if any


def session_overview(session_id: str, *, using: str = DEFAULT_DB_ALIAS) -> SessionOverview | None:
    """Header facts of a session (``None`` when there is no such session).

    A handful of small indexed queries in one read snapshot, so the facts agree
    with each other even while agents keep writing.
    """

    def read() -> SessionOverview | None:
        session = Session.objects.using(using).select_related("owner").filter(pk=session_id).first()
        if session is None:
            return None
        children_qs = Session.objects.using(using).children_of(session_id)
        children = tuple(
            children_qs.newest_first().values_list("id", "kind", "name")[:CHILDREN_SHOWN]
        )
        child_count = len(children)
        if child_count == CHILDREN_SHOWN:
            child_count = children_qs.count()
        by_state = (
            Task.objects.using(using)
            .owned_by_session(session_id)
            .values_list("state")
            .annotate(n=Count("id"))
            .order_by("state")
        )
        agent_task = (
            Task.objects.using(using)
            .filter(agent__child_session_id=session_id)
            .values_list("id", flat=True)
            .first()
        )
        owner = session.owner
        return SessionOverview(
            id=session.id,
            kind=session.kind,
            name=session.name,
            cwd=session.cwd,
            owner=owner.get_username() if owner is not None else "",
            model=session.model,
            status=session.status,
            prompt_tokens=session.prompt_tokens,
            completion_tokens=session.completion_tokens,
            created_at=session.created_at,
            updated_at=session.updated_at,
            parent_session=session.parent_session,
            parent_exists=bool(session.parent_session)
            and Session.objects.using(using).filter(pk=session.parent_session).exists(),
            superseded_by=session.superseded_by,
            entry_count=Entry.objects.using(using).filter(session_id=session_id).count(),
            step_count=Step.objects.using(using).filter(session_id=session_id).count(),
            grant_count=Grant.objects.using(using).filter(session_id=session_id).count(),
            children=children,
            child_count=child_count,
            refs=tuple(
                Ref.objects.using(using)
                .filter(session_id=session_id)
                .order_by("name")
                .values_list("name", "entry_id")
            ),
            hold=None,
            tasks_by_state=tuple((state, n) for state, n in by_state),
            agent_task_id=agent_task or "",
        )

    overview = read_only(read, using=using)
    if overview is None:
        return None
    # The LogStore reads the hold in its own snapshot (it owns the hold protocol).
    return replace(overview, hold=hold_of(session_id, using=using))


# -- tree view -----------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class TreeNode:
    """One entry as the tree view draws it (a narrow projection, never the full entry)."""

    pk: int
    seq: int
    id: str
    parent_id: str | None
    type: str
    created_at: datetime
    role: str = ""
    custom_type: str = ""
    provider: str = ""
    model: str = ""
    display: bool = True
    model_facing: bool = False
    tool_name: str = ""
    token_estimate: int = 0
    first_kept: str = ""
    tokens_before: int = 0
    branch_from: str = ""
    preview: str = ""
    line: str = ""
    children: list[TreeNode] = field(default_factory=list)
    label: str = ""
    is_leaf: bool = False
    on_leaf_path: bool = False
    orphan: bool = False
    cut: bool = False  # the parent is above the drawn window
    first_kept_seq: int = 0  # where a compaction's kept range starts (0: not in the session)

    @property
    def is_branch_point(self) -> bool:
        return len(self.children) > 1

    @property
    def thinking_level(self) -> str:
        """The level a ``thinking_level_change`` sets (``""`` otherwise)."""
        value = _decode(self.line).get("thinking_level") if self.line else None
        return value if isinstance(value, str) else ""

    @property
    def notable(self) -> bool:
        """Worth showing even inside a long run (anything but a plain message)."""
        return (
            self.type not in MESSAGE_TYPES
            or bool(self.label)
            or self.is_leaf
            or self.is_branch_point
            or self.orphan
            or self.cut
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionTree:
    """A session's entries nested as a forest, plus where the latest leaf is.

    A big session is drawn one *window* of ``seq`` at a time (``first_seq`` to
    ``last_seq``); ``older_before`` is the ``before`` of the window above it
    (0: this window starts at the first entry).
    """

    session_id: str
    roots: tuple[TreeNode, ...]
    size: int
    leaf_id: str
    branch_points: int
    compactions: int
    first_seq: int = 0
    last_seq: int = 0
    older_before: int = 0
    latest: bool = True


def _decode(line: str) -> dict[str, Any]:
    try:
        value = json.loads(line or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


#: Entries one tree page draws: a bigger session is drawn in windows of ``seq``.
TREE_WINDOW = 2_000


def session_tree(
    session_id: str,
    *,
    before: int = 0,
    window: int = TREE_WINDOW,
    using: str = DEFAULT_DB_ALIAS,
) -> SessionTree:
    """Read a window of the session's entries in one query and nest them.

    The window is the ``window`` entries with the highest ``seq`` below
    ``before`` (0: the latest ones), so a page costs the same on a 100,000-entry
    session as on a small one. A parent always has a lower ``seq`` than its
    children, so the latest window holds every child of its entries: its leaf
    and labels are exact. An entry whose parent lies above the window is drawn
    as a root marked ``cut`` (the ``orphan`` flag stays for a parent that is
    not in the session at all). In an older window, later children and labels
    are not seen, so no leaf is marked.

    Siblings are ordered like ``TreeStore.tree`` orders them (timestamp, then
    ``seq``); the latest leaf is ``TreeStore.branch(sid, "")``'s: the most recent
    childless entry. Labels fold like ``TreeStore.label``: the last label entry
    for a target wins, a non-string label clears it.
    """
    vendor = connections[using].vendor
    # On SQLite, read the timestamp as its stored text and parse it with
    # ``sql.utc`` (the one fast path, stores/sql.py): Django's per-row datetime
    # converter is most of the cost of a 10,000-row read.
    created: Any = Cast("created_at", TextField()) if vendor == "sqlite" else "created_at"
    to_datetime = sql.utc
    in_session = Entry.objects.using(using).filter(session_id=session_id)
    newest = in_session.filter(seq__lt=before) if before > 0 else in_session
    # The window's lower edge: one probe of the (session, seq) index.
    edge = newest.order_by("-seq").values_list("seq", flat=True)[window : window + 1]
    low = edge[0] if edge else 0
    window_rows = newest.filter(seq__gt=low)
    rows = window_rows.order_by("seq").values_list(
        "pk",
        "seq",
        "entry_id",
        "parent_id",
        "type",
        created,
        "role",
        "custom_type",
        "provider",
        "model",
        "display",
        "model_facing",
        "tool_name",
        "token_estimate",
        "compaction_first_kept_entry_id",
        "compaction_tokens_before",
        "branch_from_entry_id",
        Case(
            When(~Q(summary=""), then=Substr("summary", 1, PREVIEW_CHARS)),
            default=Substr("content", 1, PREVIEW_CHARS),
            output_field=TextField(),
        ),
        Case(
            When(type__in=_LINE_TYPES, then="line"),
            default=Value(""),
            output_field=TextField(),
        ),
    )
    nodes: dict[str, TreeNode] = {}
    ordered: list[TreeNode] = []
    for row in rows:
        node = TreeNode(
            pk=row[0],
            seq=row[1],
            id=row[2],
            parent_id=row[3],
            type=row[4],
            created_at=to_datetime(row[5]),
            role=row[6],
            custom_type=row[7],
            provider=row[8],
            model=row[9],
            display=bool(row[10]),
            model_facing=bool(row[11]),
            tool_name=row[12],
            token_estimate=row[13],
            first_kept=row[14],
            tokens_before=row[15],
            branch_from=row[16],
            preview=row[17] or "",
            line=row[18] or "",
        )
        nodes[node.id] = node
        ordered.append(node)
    latest = before <= 0
    if not latest and ordered:
        # Is anything newer than this window? (When not, it is the latest one.)
        latest = not in_session.filter(seq__gt=ordered[-1].seq).exists()
    tree = _nest(session_id, nodes, ordered, cut=low > 0, mark_leaf=latest)
    return replace(
        tree,
        first_seq=ordered[0].seq if ordered else 0,
        last_seq=ordered[-1].seq if ordered else 0,
        older_before=(low + 1) if low > 0 else 0,
        latest=latest,
    )


def _nest(
    session_id: str,
    nodes: dict[str, TreeNode],
    ordered: list[TreeNode],
    *,
    cut: bool = False,
    mark_leaf: bool = True,
) -> SessionTree:
    roots: list[TreeNode] = []
    labels: dict[str, str] = {}
    by_time = sorted(ordered, key=lambda n: (n.created_at, n.seq))
    for node in by_time:
        parent = nodes.get(node.parent_id) if node.parent_id is not None else None
        if parent is None or parent is node:
            # A parent id that names no entry of the session draws as a root,
            # flagged, rather than vanishing from the picture. In a window that
            # does not start at the first entry, the parent may simply be above
            # the window: that is a cut, not an orphan.
            if cut and node.parent_id is not None and parent is None:
                node.cut = True
            else:
                node.orphan = node.parent_id is not None
            roots.append(node)
        else:
            parent.children.append(node)
        if node.type == "label":
            data = _decode(node.line)
            target = data.get("target_id")
            if isinstance(target, str):
                value = data.get("label")
                labels[target] = value if isinstance(value, str) else ""
    leaf: TreeNode | None = None
    for node in by_time:
        if node.first_kept and node.first_kept in nodes:
            node.first_kept_seq = nodes[node.first_kept].seq
        if node.id in labels:
            node.label = labels[node.id]
        if not node.children and mark_leaf:
            leaf = node  # by_time is ascending: the last childless one wins
    if leaf is not None:
        leaf.is_leaf = True
        seen: set[str] = set()
        walk: TreeNode | None = leaf
        while walk is not None and walk.id not in seen:
            seen.add(walk.id)
            walk.on_leaf_path = True
            walk = nodes.get(walk.parent_id) if walk.parent_id is not None else None
    return SessionTree(
        session_id=session_id,
        roots=tuple(roots),
        size=len(ordered),
        leaf_id=leaf.id if leaf else "",
        branch_points=sum(1 for n in ordered if len(n.children) > 1),
        compactions=sum(1 for n in ordered if n.type == "compaction"),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeRow:
    """One line of the rendered tree.

    ``kind`` is ``"node"`` (draw ``node``), ``"open"``/``"close"`` (a branch of a
    branch point starts/ends), ``"run_open"``/``"run_close"`` (a collapsed run of
    plain messages starts/ends) or ``"run_link"`` (a run too long to inline:
    ``first_seq``..``last_seq`` are listed on the entries changelist).
    """

    kind: str
    node: TreeNode | None = None
    depth: int = 0
    count: int = 0
    first_seq: int = 0
    last_seq: int = 0
    index: int = 0
    on_leaf_path: bool = False


#: A run of plain single-child messages longer than this is collapsed …
RUN_COLLAPSE_AT = 12
#: … keeping this many entries visible at each end.
RUN_KEEP = 3
#: Collapsed runs up to this size are inlined (closed); longer ones become a link.
RUN_INLINE_MAX = 50


def tree_rows(tree: SessionTree) -> list[TreeRow]:
    """Flatten the forest for a single template loop, collapsing long plain runs.

    Depth grows only at branch points: a chain of single children is one column
    (how people read a conversation). Iterative, so a 10,000-deep chain is fine.
    """
    rows: list[TreeRow] = []
    stack: list[tuple[str, Any, int]] = []
    _push_children(stack, list(tree.roots), 0)
    visited: set[str] = set()
    while stack:
        action, item, depth = stack.pop()
        if action == "row":
            rows.append(item)
            continue
        chain: list[TreeNode] = []
        node: TreeNode = item
        while node.id not in visited:
            visited.add(node.id)
            chain.append(node)
            if len(node.children) != 1:
                break
            node = node.children[0]
        _emit_chain(rows, chain, depth)
        _push_children(stack, [c for c in chain[-1].children if c.id not in visited], depth)
    return rows


def _push_children(stack: list[tuple[str, Any, int]], children: list[TreeNode], depth: int) -> None:
    if len(children) == 1:
        stack.append(("chain", children[0], depth))
        return
    total = len(children)
    for index in range(total - 1, -1, -1):
        child = children[index]
        stack.append(("row", TreeRow(kind="close", depth=depth + 1), depth))
        stack.append(("chain", child, depth + 1))
        stack.append(
            (
                "row",
                TreeRow(
                    kind="open",
                    node=child,
                    depth=depth + 1,
                    index=index + 1,
                    count=total,
                    on_leaf_path=child.on_leaf_path,
                ),
                depth,
            )
        )


def _emit_chain(rows: list[TreeRow], chain: list[TreeNode], depth: int) -> None:
    start = 0
    while start < len(chain):
        if chain[start].notable:
            rows.append(TreeRow(kind="node", node=chain[start], depth=depth))
            start += 1
            continue
        end = start
        while end < len(chain) and not chain[end].notable:
            end += 1
        plain = chain[start:end]
        if len(plain) <= RUN_COLLAPSE_AT:
            rows.extend(TreeRow(kind="node", node=n, depth=depth) for n in plain)
        else:
            head, middle, tail = (
                plain[:RUN_KEEP],
                plain[RUN_KEEP:-RUN_KEEP],
                plain[-RUN_KEEP:],
            )
            rows.extend(TreeRow(kind="node", node=n, depth=depth) for n in head)
            run = TreeRow(
                kind="run_open" if len(middle) <= RUN_INLINE_MAX else "run_link",
                depth=depth,
                count=len(middle),
                first_seq=min(n.seq for n in middle),
                last_seq=max(n.seq for n in middle),
                on_leaf_path=middle[0].on_leaf_path,
            )
            rows.append(run)
            if run.kind == "run_open":
                rows.extend(TreeRow(kind="node", node=n, depth=depth) for n in middle)
                rows.append(TreeRow(kind="run_close", depth=depth))
            rows.extend(TreeRow(kind="node", node=n, depth=depth) for n in tail)
        start = end


# -- context view --------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextLine:
    """A message of the context and the entry it came from, with the reason it is there."""

    index: int
    message: MessageEntity
    entry_id: str
    entry_seq: int
    reason: str
    is_anchor: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextView:
    """``TreeStore.build_context`` at one entry, explained against the branch."""

    entry_id: str
    context: SessionContextEntity
    lines: tuple[ContextLine, ...]
    left_out: tuple[tuple[EntryEntity, str], ...]  # branch entries not sent, and why
    branch_length: int
    #: Only the kept part of a long compacted branch is explained (``branch_length`` counts it).
    partial: bool = False


def context_view(
    session_id: str, entry_id: str = "", *, store: TreeStore | None = None
) -> ContextView | None:
    """What the model would see at ``entry_id`` (``""``: the latest leaf), and why.

    ``None`` when the session has no entries. The context itself is
    ``TreeStore.build_context``'s; this only *attributes* its messages to the
    branch entries they came from (``TreeStore.branch``), in order, and says why
    the other branch entries were left out. Raises the
    store's ``NoEntry`` for an entry id that is not in the session.
    """
    store = store or TreeStore()
    if not entry_id:
        latest = store.branch(session_id, "", 1)
        if not latest:
            return None
        entry_id = latest[-1].id
    bound = int(agentstore_settings.MAX_CONTEXT_BRANCH)
    # Read at most one entry past the bound: a branch that fits is the whole
    # branch (one walk serves both the check and the explanation).
    branch = store.branch(session_id, entry_id, bound + 1 if bound > 0 else 0)
    partial = False
    if bound > 0 and len(branch) > bound:
        # A long compacted branch: the context reads only its kept part
        # (decision record 0027), so that part is what the bound limits and
        # what is explained.
        kept = store.context_length(session_id, entry_id, at_most=bound)
        if kept <= bound:
            branch, partial = branch[len(branch) - kept :], True
    if bound > 0 and len(branch) > bound:
        raise TooLarge(
            f"the branch to entry {entry_id} is longer than MAX_CONTEXT_BRANCH={bound} "
            "entries: too long to explain here; read it on the entries list or with the "
            "API's /branch pages",
            limit=bound,
        )
    context = store.build_context(session_id, entry_id)
    last_compaction = max((i for i, e in enumerate(branch) if e.type == "compaction"), default=-1)
    kept_from = -1
    if last_compaction >= 0:
        first_kept = branch[last_compaction].compaction_first_kept_entry_id
        kept_from = next(
            (i for i in range(last_compaction) if first_kept and branch[i].id == first_kept), -1
        )
    anchor = context.usage_anchor
    used: set[int] = set()
    lines: list[ContextLine] = []
    # Context messages follow the branch's order (the compaction summary aside),
    # so each search starts after the last match: linear, not quadratic.
    start = 0
    for index, message in enumerate(context.messages):
        position, reason = _attribute(branch, message, used, last_compaction, kept_from, start)
        if position >= 0 and position != last_compaction:
            start = position + 1
        entry = branch[position] if position >= 0 else None
        if position >= 0:
            used.add(position)
        lines.append(
            ContextLine(
                index=index,
                message=message,
                entry_id=entry.id if entry else "",
                entry_seq=entry.seq if entry else 0,
                reason=reason,
                is_anchor=anchor is not None and anchor.message_index == index,
            )
        )
    left_out = tuple(
        (entry, _why_left_out(entry, i, last_compaction, kept_from))
        for i, entry in enumerate(branch)
        if i not in used
    )
    return ContextView(
        entry_id=entry_id,
        context=context,
        lines=tuple(lines),
        left_out=left_out,
        branch_length=len(branch),
        partial=partial,
    )


def _attribute(
    branch: Sequence[EntryEntity],
    message: MessageEntity,
    used: set[int],
    last_compaction: int,
    kept_from: int,
    start: int = 0,
) -> tuple[int, str]:
    if message.role == "compactionSummary" and last_compaction >= 0:
        compaction = branch[last_compaction]
        kept = (
            f", keeping from {compaction.compaction_first_kept_entry_id}" if kept_from >= 0 else ""
        )
        return last_compaction, f"summary of compaction (replaces everything before it{kept})"
    wanted_type = "branch_summary" if message.role == "branchSummary" else None
    found = _find(branch, message, used, wanted_type, start)
    if found < 0 and start > 0:
        found = _find(branch, message, used, wanted_type, 0)  # out of order: look again
    if found < 0:
        return -1, "not traced to a branch entry"
    if last_compaction >= 0 and kept_from <= found < last_compaction:
        return found, "kept by the compaction (retained tail)"
    if wanted_type is not None:
        return found, "branch summary (always sent)"
    return found, "model-facing message on the branch"


def _find(
    branch: Sequence[EntryEntity],
    message: MessageEntity,
    used: set[int],
    wanted_type: str | None,
    start: int,
) -> int:
    for i in range(start, len(branch)):
        entry = branch[i]
        if i in used:
            continue
        if wanted_type is not None:
            if entry.type != wanted_type or entry.summary != message.content:
                continue
        elif not (
            entry.type in MESSAGE_TYPES
            and entry.message.role == message.role
            and entry.message.content == message.content
            and entry.created_at == message.timestamp
        ):
            continue
        return i
    return -1


def _why_left_out(entry: EntryEntity, position: int, last_compaction: int, kept_from: int) -> str:
    if (
        last_compaction >= 0
        and position < last_compaction
        and not (kept_from <= position and entry.type in MESSAGE_TYPES and entry.model_facing)
    ):
        if entry.type in ("model_change", "thinking_level_change"):
            return "settings change before the compaction (still in force)"
        return "replaced by the compaction summary"
    if entry.type in MESSAGE_TYPES and not entry.model_facing:
        return "not model-facing"
    if entry.type == "model_change":
        return f"sets the model: {entry.message.provider}/{entry.message.model}"
    if entry.type == "thinking_level_change":
        return f"sets the thinking level: {entry.data.get('thinking_level', '')}"
    return f"{entry.type} entries send nothing to the model"


# -- loop steps ----------------------------------------------------------------------


def steps_of(session_id: str, *, using: str = DEFAULT_DB_ALIAS) -> Any:
    """A loop session's steps in insertion order, as a lazy queryset for a paginator.

    ``LoopStore.steps`` reads every step at once (its contract); the admin pages
    through this instead, so a page costs the same whatever the trace's length.
    The rows have the ``RunStep`` field names the template reads.
    """
    return Step.objects.using(using).filter(session_id=session_id).order_by("id")


# -- tasks ---------------------------------------------------------------------------


def expired_leases(now: datetime, *, using: str = DEFAULT_DB_ALIAS) -> Any:
    """Running/canceling tasks of any kind whose lease is absent or expired at ``now``."""
    return (
        Task.objects.using(using)
        .filter(state__in=LEASED_STATES)
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now))
    )


# -- dashboard -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Dashboard:
    """The admin index block: how much there is and what needs attention."""

    sessions_by_kind: tuple[tuple[str, int], ...]
    sessions: int
    active_holds: int
    tasks_by_state: tuple[tuple[str, int], ...]
    expired_leases: int
    expired_kinds: tuple[str, ...]


def dashboard(now: datetime, *, using: str = DEFAULT_DB_ALIAS) -> Dashboard:
    """Counts for the admin index, each one grouped query (four in all)."""

    def read() -> Dashboard:
        by_kind = tuple(
            Session.objects.using(using)
            .values_list("kind")
            .annotate(n=Count("id"))
            .order_by("kind")
        )
        states = dict(
            Task.objects.using(using).values_list("state").annotate(n=Count("id")).order_by()
        )
        expired = list(
            expired_leases(now, using=using).values_list("kind").annotate(n=Count("id")).order_by()
        )
        return Dashboard(
            sessions_by_kind=by_kind,
            sessions=sum(n for _, n in by_kind),
            active_holds=Holder.objects.using(using).count(),
            tasks_by_state=tuple((str(s), states.get(str(s), 0)) for s in TaskState.values),
            expired_leases=sum(n for _, n in expired),
            expired_kinds=tuple(kind for kind, _ in sorted(expired)),
        )

    return read_only(read, using=using)

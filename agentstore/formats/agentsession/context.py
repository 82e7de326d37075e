"""Context building: what a model call at a point of the tree receives.

The algorithm is normative (docs/agentsession-format.md, "Context and the
request hash"); readers that differ rebuild different requests and the
recorded request hashes stop verifying.
Given a leaf:

1. Walk ``parent`` from the leaf to the root and reverse (``parents`` ignored).
2. Find the *last* ``compaction`` on the path. If there is one, settings start
   from its ``config`` checkpoint and only ``config`` entries after it replay;
   the items are its ``summary``, its ``pinned`` items, the items from its
   ``first_kept`` entry up to the compaction, then the items after it.
   ``first_kept`` must be on the path before the compaction.
   Without a compaction every ``config`` replays from the root.
3. Config replay (:func:`apply_config`): ``replace`` resets first; ``model``
   replaces; ``instructions`` (a string) replaces and clears parts;
   ``instructions_parts`` is the whole ordered list (``text`` sets a part,
   ``hash`` alone keeps the path's text, ``{"keep": n}`` takes the next n parts
   in force after a cursor); the instructions string is the part texts joined
   by a blank line; ``instructions_omitted`` resolves the same way (``keep`` may
   name the config it hands back from with ``of``); ``reasoning``/``text``
   replace; ``tools_removed`` then ``tools_added`` (same name replaces);
   ``extra`` merges with ``null`` deleting; ``omit`` merges per member.
4. Items come from ``item`` entries, ``branch_summary`` summaries and the
   selected compaction. ``omit`` drops reasoning items another model produced
   (``other_models``) and listed entries (``items``); they are reported in
   ``Context.omitted``.
5. The canonical request (:func:`canonical_request`) is ``{model,
   instructions, reasoning, text, tools, input, store: false}`` with every
   ``extra`` member flattened in, tools, ``reasoning`` and ``text`` in the
   payload profile's typed shape (:func:`canonical_tool`); its *request hash* is
   ``sha256:`` over its RFC 8785 bytes.

``request_context(session, response_id)`` rebuilds the request a ``response``
entry answered (its own output items taken off the path), and
``verify_response`` compares its hash with the recorded ``request_hash``.

The functions that need a session take any object with ``path(id)`` and
``entry(id)`` (:class:`PathSource`; a :class:`~.session.Session` is one), so this
module does not import the session module and the session module can import
it. :func:`set_extra`, :func:`clear_extra` and :func:`extra_value` are the typed
helpers for passthrough request members.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, overload

from agentstore import exceptions
from agentstore.formats.agentsession import canonical
from agentstore.formats.agentsession.entry import Entry

__all__ = [
    "PART_SEPARATOR",
    "Context",
    "PathSource",
    "apply_config",
    "build_context",
    "canonical_request",
    "canonical_settings",
    "canonical_tool",
    "clear_extra",
    "context_at",
    "extra_value",
    "output_entries",
    "request_context",
    "request_hash",
    "set_extra",
    "verify_response",
]

T = TypeVar("T")


class PathSource(Protocol):
    """What the context functions need of a session: its entries by id and paths."""

    def path(self, entry_id: str) -> list[Entry]: ...

    def entry(self, entry_id: str) -> Entry | None: ...


#: Instruction parts are joined with a blank line.
PART_SEPARATOR = "\n\n"

Settings = dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """The context at one entry.

    ``settings`` is the replayed settings object (the JSON form a compaction
    checkpoint carries: ``model``, ``instructions``, ``instructions_parts``,
    ``instructions_omitted``, ``reasoning``, ``text``, ``tools``, ``extra``,
    ``omit``; absent when empty). ``items`` are the request input items;
    ``entries`` the ids of the entries selected, in order; ``item_entries`` one
    id per item naming the entry that contributed it; ``omitted`` the
    ``{"entry", "reason"}`` records of items ``omit`` dropped.
    """

    settings: Settings = field(default_factory=dict)
    items: list[Any] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)
    item_entries: list[str] = field(default_factory=list)
    omitted: list[dict[str, str]] = field(default_factory=list)

    def request(self) -> dict[str, Any]:
        """The canonical request for this context."""
        return canonical_request(self.settings, self.items)

    def request_hash(self) -> str:
        """``sha256:`` of the canonical request's RFC 8785 bytes."""
        return request_hash(self.request())

    def as_fixture(self) -> dict[str, Any]:
        """The JSON shape of the upstream context fixtures."""
        out: dict[str, Any] = {
            "settings": self.settings,
            "items": self.items,
            "entries": self.entries,
            "item_entries": self.item_entries,
        }
        if self.omitted:
            out["omitted"] = self.omitted
        return out


def _tool_name(tool: Any) -> str:
    if isinstance(tool, dict) and isinstance(tool.get("name"), str):
        return str(tool["name"])
    return ""


def _resolve_keep_list(
    prev: list[dict[str, Any]],
    delta: list[Any],
    *,
    sources: dict[str, Settings] | None = None,
    key: str,
) -> list[dict[str, Any]]:
    """Resolve an ordered list with ``{"keep": n[, "of": id]}`` runs against ``prev``.

    ``key`` is the settings member being resolved (``instructions_parts`` or
    ``instructions_omitted``). A named element found in ``prev`` at index ``j``
    moves the cursor to ``j + 1`` (elements it skipped over are dropped);
    ``keep`` takes the next ``n`` from the cursor. With ``of``, the run is taken
    from the list in force at that config entry, with its own cursor. For
    parts, one given by ``hash`` alone takes the text of the part with that id
    and that hash from ``prev`` or from the configs the delta hands back to.
    """
    sources = sources or {}
    index = {p.get("id"): i for i, p in enumerate(prev) if isinstance(p, dict)}
    cursors: dict[str | None, int] = {}
    out: list[dict[str, Any]] = []
    # A hash-only part may name the text of a part some earlier replayed
    # config had in force (a hand-back); newest first.
    handed_back = list(reversed(sources.values())) if key == "instructions_parts" else []
    for part in delta:
        if not isinstance(part, dict):
            continue
        if "keep" in part and "id" not in part:
            n = part.get("keep")
            count = n if isinstance(n, int) and n > 0 else 0
            of = part.get("of")
            if isinstance(of, str) and of:
                if of not in sources:
                    # The config it names is not on the replayed path: keep the
                    # run as written, so a reader sees what could not resolve.
                    out.append(copy.deepcopy(part))
                    continue
                source = list(sources[of].get(key, []))
                at = cursors.get(of, 0)
                out.extend(copy.deepcopy(source[at : at + count]))
                cursors[of] = at + count
            else:
                at = cursors.get(None, 0)
                out.extend(copy.deepcopy(prev[at : at + count]))
                cursors[None] = at + count
            continue
        pid = part.get("id")
        if pid in index:
            cursors[None] = index[pid] + 1
        out.append(
            copy.deepcopy(part)
            if key != "instructions_parts"
            else _resolve_part(part, prev, handed_back)
        )
    return out


def _resolve_part(
    part: dict[str, Any], prev: list[dict[str, Any]], handed_back: list[Settings]
) -> dict[str, Any]:
    """One element of a delta's ``instructions_parts`` with its text resolved."""
    pid = part.get("id")
    nxt: dict[str, Any] = {"id": pid}
    text = part.get("text")
    if isinstance(text, str) and text:
        nxt["text"] = text
    if part.get("source"):
        nxt["source"] = part["source"]
    wanted = part.get("hash")
    if text or not wanted:
        return nxt
    candidates = [p for p in prev if isinstance(p, dict) and p.get("id") == pid]
    for settings in handed_back:
        candidates += [
            p
            for p in settings.get("instructions_parts", [])
            if isinstance(p, dict) and p.get("id") == pid
        ]
    for old in candidates:
        if "hash" not in old and canonical.hash_text(str(old.get("text", ""))) == wanted:
            nxt["text"] = old.get("text", "")
            if not nxt.get("source") and old.get("source"):
                nxt["source"] = old["source"]
            return nxt
    # A hash whose text is not on the path stays as written, so a reader can
    # tell a missing text from an empty one.
    nxt["hash"] = wanted
    return nxt


def _join(parts: list[dict[str, Any]]) -> str:
    return PART_SEPARATOR.join(str(p.get("text", "")) for p in parts)


def apply_config(
    settings: Settings,
    config: dict[str, Any],
    *,
    sources: dict[str, Settings] | None = None,
) -> Settings:
    """The settings after the config delta ``config`` (``settings`` unchanged)."""
    out: Settings = {} if config.get("replace") else copy.deepcopy(settings)
    prev_parts = [] if config.get("replace") else settings.get("instructions_parts", [])
    prev_omitted = [] if config.get("replace") else settings.get("instructions_omitted", [])
    model = config.get("model")
    if isinstance(model, str) and model:
        out["model"] = model
    parts = config.get("instructions_parts")
    if isinstance(parts, list) and parts:
        resolved = _resolve_keep_list(prev_parts, parts, sources=sources, key="instructions_parts")
        out["instructions_parts"] = resolved
        out["instructions"] = _join(resolved)
        if isinstance(config.get("instructions"), str) and any("hash" in p for p in resolved):
            # An unresolvable part has no text to join: the string the writer
            # recorded beside the parts is what the model was sent.
            out["instructions"] = config["instructions"]
    elif "instructions" in config and isinstance(config["instructions"], str):
        out["instructions"] = config["instructions"]
        out.pop("instructions_parts", None)
    omitted = config.get("instructions_omitted")
    if isinstance(omitted, list):
        out["instructions_omitted"] = _resolve_keep_list(
            prev_omitted, omitted, sources=sources, key="instructions_omitted"
        )
    for name in ("reasoning", "text"):
        if name in config and config[name] is not None:
            out[name] = copy.deepcopy(config[name])
    tools = list(out.get("tools", []))
    for name in config.get("tools_removed") or []:
        tools = [t for t in tools if _tool_name(t) != name]
    for tool in config.get("tools_added") or []:
        name = _tool_name(tool)
        if name:
            tools = [t for t in tools if _tool_name(t) != name]
        tools.append(copy.deepcopy(tool))
    out["tools"] = tools
    extra = dict(out.get("extra", {}))
    for key, value in (config.get("extra") or {}).items():
        if value is None:
            extra.pop(key, None)
        else:
            extra[key] = copy.deepcopy(value)
    out["extra"] = extra
    omit = dict(out.get("omit", {}))
    delta_omit = config.get("omit")
    if isinstance(delta_omit, dict):
        for key, value in delta_omit.items():
            if value is None:
                omit.pop(key, None)
            else:
                omit[key] = copy.deepcopy(value)
    out["omit"] = omit
    for key in (
        "tools",
        "extra",
        "omit",
        "instructions_parts",
        "instructions_omitted",
        "instructions",
    ):
        if key in out and not out[key]:
            del out[key]
    return out


def _contributes(e: Entry) -> Any:
    if e.type == "item":
        return e.data.get("item")
    if e.type == "branch_summary":
        return e.data.get("summary")
    return None


def build_context(path: list[Entry], session: PathSource | None = None) -> Context:
    """Run the context algorithm over a root-first path of entries."""
    settings: Settings = {}
    # (entry, item, from the compaction, model in force where the entry sits)
    selected: list[tuple[Entry, Any, bool, Any]] = []
    entries: list[str] = []
    start = 0
    comp_index = -1
    for i, e in enumerate(path):
        if e.type == "compaction":
            comp_index = i
    sources: dict[str, Settings] = {}
    if comp_index >= 0:
        comp = path[comp_index]
        first_kept = comp.data.get("first_kept")
        kept = next((i for i in range(comp_index) if path[i].id == first_kept), -1)
        if kept < 0:
            raise exceptions.NoEntry(
                f"compaction {comp.id}: first_kept {first_kept!r} is not on the path before it"
            )
        checkpoint = comp.data.get("config")
        settings = copy.deepcopy(checkpoint) if isinstance(checkpoint, dict) else {}
        # Only configs replayed after the checkpoint can be handed back to;
        # a hand-back naming one folded into the checkpoint stays unresolved.
        sources[comp.id] = settings
        entries.append(comp.id)
        selected.append((comp, comp.data.get("summary"), True, None))
        for pinned in comp.data.get("pinned") or []:
            selected.append((comp, pinned, True, None))
        for e in path[kept:comp_index]:
            entries.append(e.id)
            item = _contributes(e)
            if item is not None:
                selected.append((e, item, False, settings.get("model")))
        start = comp_index + 1
    for e in path[start:]:
        if e.type == "config":
            settings = apply_config(settings, e.data, sources=sources)
            sources[e.id] = settings
        entries.append(e.id)
        item = _contributes(e)
        if item is not None:
            selected.append((e, item, False, settings.get("model")))
    omit = settings.get("omit") or {}
    omit_items = set(omit.get("items") or [])
    other_models = omit.get("reasoning") == "other_models"
    items: list[Any] = []
    item_entries: list[str] = []
    omitted: list[dict[str, str]] = []
    for e, item, from_compaction, produced_by in selected:
        if not from_compaction:
            if e.id in omit_items:
                omitted.append({"entry": e.id, "reason": "items"})
                continue
            # Reasoning belongs to the model the request named (the settings in
            # force where it sits), not the dated snapshot a provider reports
            # in the response entry.
            if (
                other_models
                and isinstance(item, dict)
                and item.get("type") == "reasoning"
                and produced_by
                and produced_by != settings.get("model")
            ):
                omitted.append({"entry": e.id, "reason": "other_models"})
                continue
        items.append(copy.deepcopy(item))
        item_entries.append(e.id)
    return Context(
        settings=settings,
        items=items,
        entries=entries,
        item_entries=item_entries,
        omitted=omitted,
    )


def context_at(session: PathSource, entry_id: str) -> Context:
    """The context at ``entry_id`` (empty for ``""``); ``NoEntry`` if unknown."""
    if not entry_id:
        return Context()
    path = session.path(entry_id)
    if not path:
        raise exceptions.NoEntry(f"no such entry: {entry_id}")
    return build_context(path, session)


def canonical_tool(tool: Any) -> Any:
    """A tool in the payload profile's typed shape, the form the request hash covers.

    A ``function`` tool is exactly ``{type, name, description, parameters[,
    strict]}``: ``description`` is ``""`` and ``parameters`` ``null`` when absent,
    ``strict`` appears only when it is a boolean, and members the profile does
    not define are dropped (the reference decodes the tool into its typed form
    before hashing, so they never reached its hash). A tool of any other type is
    kept exactly as written (a tool without ``type`` too), as the reference keeps
    an unknown tool's raw bytes.
    """
    if not isinstance(tool, dict) or tool.get("type") != "function":
        return tool
    out: dict[str, Any] = {
        "type": "function",
        "name": tool.get("name") if isinstance(tool.get("name"), str) else "",
        "description": tool.get("description") if isinstance(tool.get("description"), str) else "",
        "parameters": tool.get("parameters"),
    }
    if isinstance(tool.get("strict"), bool):
        out["strict"] = tool["strict"]
    return out


def _canonical_reasoning(value: Any) -> Any:
    """``{effort, summary}`` with ``null`` for an unset member; ``None`` when both are unset."""
    if not isinstance(value, dict):
        return value or None
    effort, summary = value.get("effort") or None, value.get("summary") or None
    if effort is None and summary is None:
        return None
    return {"effort": effort, "summary": summary}


def _canonical_text(value: Any) -> Any:
    """``{format[, verbosity]}``, format defaulting to ``{"type": "text"}``; ``None`` if unset."""
    if not isinstance(value, dict):
        return value or None
    fmt, verbosity = value.get("format"), value.get("verbosity")
    if not fmt and not verbosity:
        return None
    out: dict[str, Any] = {"format": fmt or {"type": "text"}}
    if verbosity:
        out["verbosity"] = verbosity
    return out


def canonical_settings(settings: Settings) -> Settings:
    """``settings`` with ``tools``, ``reasoning`` and ``text`` in their typed shapes.

    ``tools`` go through :func:`canonical_tool`; ``reasoning`` is ``{effort,
    summary}`` with ``null`` for an unset one and ``text`` is ``{format,
    verbosity}`` with the format defaulting to ``{"type": "text"}`` — the shapes
    the reference serialises its typed settings in — and either is left out
    when unset. Everything else is kept. A copy; ``settings`` is unchanged.
    """
    out = copy.deepcopy(settings)
    for name, shape in (("reasoning", _canonical_reasoning), ("text", _canonical_text)):
        if name in out:
            value = shape(out[name])
            if value is None:
                del out[name]
            else:
                out[name] = value
    if out.get("tools"):
        out["tools"] = [canonical_tool(t) for t in out["tools"]]
    return out


def canonical_request(settings: Settings, items: list[Any]) -> dict[str, Any]:
    """The canonical request the request hash is taken over.

    ``{model, instructions, reasoning, text, tools, input, store: false}`` with
    every ``extra`` member flattened in (a named member wins over an ``extra``
    of the same name), the settings taken through :func:`canonical_settings`,
    so the same settings hash alike here and in the reference. Empty members
    are left out.
    """
    typed = canonical_settings(settings)
    request: dict[str, Any] = {}
    for extra_key, value in (typed.get("extra") or {}).items():
        request[extra_key] = value
    for name in ("model", "instructions", "reasoning", "text", "tools"):
        if typed.get(name):
            request[name] = typed[name]
    request["input"] = items
    request["store"] = False
    return request


# -- passthrough request members ("extra") -------------------------------------


def set_extra(config: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """Record the passthrough request member ``key`` on a ``config`` delta; return it.

    ``value`` must be a JSON value (``ValidationError`` otherwise) and not
    ``None``: a ``null`` in a delta means "remove", which :func:`clear_extra`
    says. Replaces an earlier value of the same key in this delta.
    """
    if value is None:
        raise exceptions.ValidationError(
            f"extra {key!r}: None would remove the member; use clear_extra", field=f"extra.{key}"
        )
    canonical.dumps(value)  # a JSON value, or ValidationError
    extra = config.get("extra")
    config["extra"] = {**(extra if isinstance(extra, dict) else {}), key: copy.deepcopy(value)}
    return config


def clear_extra(config: dict[str, Any], key: str) -> dict[str, Any]:
    """Record the removal of ``key`` on a ``config`` delta (``null`` deletes on replay)."""
    extra = config.get("extra")
    config["extra"] = {**(extra if isinstance(extra, dict) else {}), key: None}
    return config


@overload
def extra_value(settings: Settings, key: str) -> Any: ...


@overload
def extra_value(settings: Settings, key: str, kind: type[T]) -> T | None: ...


def extra_value(settings: Settings, key: str, kind: type[Any] | None = None) -> Any:
    """The passthrough member ``key`` in force in ``settings`` (``Context.settings``), or ``None``.

    With ``kind`` (``float``, ``int``, ``str``, ``bool``, ``dict``, ``list``)
    the value must be of that JSON type or ``ValidationError`` is raised; an
    integer is accepted for ``float`` and returned as a float.
    """
    extra = settings.get("extra")
    if not isinstance(extra, dict) or key not in extra:
        return None
    value = extra[key]
    if kind is None:
        return copy.deepcopy(value)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise exceptions.ValidationError(
            f"extra {key!r} is {type(value).__name__}, not {kind.__name__}",
            field=f"extra.{key}",
        )
    return copy.deepcopy(value)


def request_hash(request: dict[str, Any]) -> str:
    """The request hash: ``sha256:`` of the request's RFC 8785 bytes."""
    return canonical.hash_value(request)


def output_entries(path: list[Entry], response: Entry) -> list[Entry]:
    """The item entries on ``path`` that hold ``response``'s own output, path order.

    Walking back: non-item entries are skipped, an item whose ``response``
    names this response is output, the first item naming another response
    (or none) stops the walk.
    """
    rid = response.data.get("response_id")
    if not isinstance(rid, str) or not rid:
        return []
    found: list[Entry] = []
    for e in reversed(path):
        if e.type != "item":
            continue
        if e.data.get("response") != rid:
            break
        found.append(e)
    found.reverse()
    return found


def request_context(session: PathSource, entry_id: str) -> Context:
    """The context of the request that produced the ``response`` entry ``entry_id``."""
    e = session.entry(entry_id)
    if e is None:
        raise exceptions.NoEntry(f"no such entry: {entry_id}")
    if e.type != "response":
        raise exceptions.ValidationError(
            f"entry {entry_id} is a {e.type}, not a response", field="entry_id"
        )
    path = session.path(entry_id)[:-1]
    output = {x.id for x in output_entries(path, e)}
    return build_context([x for x in path if x.id not in output], session)


def verify_response(session: PathSource, entry_id: str) -> None:
    """Check one response's ``request_hash``; ``HashMismatch`` if it does not verify.

    A response that recorded no hash cannot be verified: ``NoHash`` names it
    (whole-session ``Session.verify`` skips such responses instead).
    """
    ctx = request_context(session, entry_id)
    e = session.entry(entry_id)
    assert e is not None  # request_context raised NoEntry otherwise
    recorded = e.data.get("request_hash")
    if not recorded:
        raise exceptions.NoHash(f"response {entry_id} recorded no request_hash", field=entry_id)
    got = ctx.request_hash()
    if got != recorded:
        raise exceptions.HashMismatch(
            f"response {entry_id} recorded request hash {recorded}, rebuilt {got}"
        )

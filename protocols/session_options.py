"""What an agent offers a session, as pure functions over the wire shapes (DESIGN.md §19).

Every dialect's way of offering choices becomes one list of options, each
``{id, name, category, type, current, choices: [{value, name, description}]}``:

- ACP ``configOptions`` (v1 names an option ``id``, v2 ``configId``; a select's
  values may come in groups, flattened here in order);
- else ACP's legacy ``modes {currentModeId, availableModes}`` (option ``mode``)
  and ``models {currentModelId, availableModels}`` (option ``model``), which
  agents still send beside ``configOptions`` (claude-agent-acp 0.101) or alone
  (gemini 0.61, auggie 0.36);
- Codex: the thread's ``model``, ``reasoningEffort`` and ``approvalPolicy``
  (``thread/start``'s answer) with ``model/list``'s models.

Only ``select`` options are kept (we do not advertise ACP's boolean ones; an
unknown type is to be ignored, says the spec).  A current value the agent does
not list among its choices (gemini 0.61 answers ``currentModelId:
"gemini-2.5-flash"`` and lists other models) is added as a choice of its own,
so the list always shows what is in effect.  An option with no choices at all
(auggie's empty ``availableModels``) is left out.

The other session updates of §19 are read here too: commands, usage, titles.
Nothing here keeps state: ``protocols.acp_session`` and ``protocols.codex`` do.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

__all__ = [
    "APPROVAL_POLICIES",
    "DEFAULT_EFFORTS",
    "Option",
    "OptionCategory",
    "acp_commands",
    "acp_title",
    "acp_usage",
    "check_choice",
    "codex_options",
    "codex_usage",
    "from_config_options",
    "from_legacy",
    "from_session_result",
    "with_current",
]

#: One option as the session DTO carries it.
Option: TypeAlias = dict[str, Any]
OptionCategory: TypeAlias = Literal[
    "mode", "model", "reasoning_effort", "approval_policy", "other"]

#: ACP's categories (``SessionConfigOptionCategory``) as ours; any other, or
#: none, is ``other`` (categories are UX hints, the spec says, never needed).
_ACP_CATEGORIES: Final[dict[str, OptionCategory]] = {
    "mode": "mode", "model": "model", "thought_level": "reasoning_effort"}
#: Codex's approval policies (v2 ``AskForApproval``'s plain values).
APPROVAL_POLICIES: Final = ("untrusted", "on-failure", "on-request", "never")
#: The efforts offered when ``model/list`` says nothing of the chosen model's.
DEFAULT_EFFORTS: Final = ("low", "medium", "high")


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _choice(value: str, name: object, description: object) -> dict[str, Any]:
    return {"value": value, "name": _str(name) or value, "description": _str(description)}


def _option(option_id: str, name: str, category: OptionCategory, current: str | None,
            choices: list[dict[str, Any]]) -> Option:
    if current is not None and current not in {c["value"] for c in choices}:
        choices.append(_choice(current, current, None))
    return {"id": option_id, "name": name, "category": category, "type": "select",
            "current": current, "choices": choices}


def _select_values(raw: object) -> list[dict[str, Any]]:
    """A select's values, flat: ``[{value, name, description}]`` or groups of them."""
    choices: list[dict[str, Any]] = []
    for entry in raw if isinstance(raw, list) else ():
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("options"), list) and "value" not in entry:
            choices.extend(_select_values(entry["options"]))
            continue
        value = _str(entry.get("value"))
        if value is not None:
            choices.append(_choice(value, entry.get("name"), entry.get("description")))
    return choices


def from_config_options(raw: object) -> tuple[Option, ...]:
    """ACP ``configOptions`` (v1 or v2) as our options; malformed entries are skipped."""
    options: list[Option] = []
    for entry in raw if isinstance(raw, list) else ():
        if not isinstance(entry, dict) or entry.get("type") != "select":
            continue
        option_id = _str(entry.get("configId")) or _str(entry.get("id"))
        choices = _select_values(entry.get("options"))
        current = _str(entry.get("currentValue"))
        if option_id is None or not (choices or current):
            continue
        category = _ACP_CATEGORIES.get(_str(entry.get("category")) or "", "other")
        options.append(_option(option_id, _str(entry.get("name")) or option_id, category,
                               current, choices))
    return tuple(options)


def _legacy(state: object, option_id: Literal["mode", "model"]) -> Option | None:
    if not isinstance(state, dict):
        return None
    listed, key, cur = (("availableModes", "id", "currentModeId") if option_id == "mode"
                        else ("availableModels", "modelId", "currentModelId"))
    choices = [_choice(e[key], e.get("name"), e.get("description"))
               for e in state.get(listed) or () if isinstance(e, dict) and _str(e.get(key))]
    if not choices:
        return None
    return _option(option_id, "Mode" if option_id == "mode" else "Model", option_id,
                   _str(state.get(cur)) or None, choices)


def from_legacy(modes: object, models: object) -> tuple[Option, ...]:
    """ACP's legacy ``modes`` and ``models`` as the options ``mode`` and ``model``."""
    return tuple(o for o in (_legacy(modes, "mode"), _legacy(models, "model")) if o is not None)


def from_session_result(result: object) -> tuple[tuple[Option, ...], bool] | None:
    """The options a ``session/new``/``load``/``resume`` answer offers, and whether
    they are the legacy shapes (set with ``set_mode``/``set_model``); None: the
    answer offers none (the options known before stay)."""
    if not isinstance(result, dict):
        return None
    if isinstance(result.get("configOptions"), list):
        return from_config_options(result["configOptions"]), False
    if "modes" in result or "models" in result:
        return from_legacy(result.get("modes"), result.get("models")), True
    return None


def with_current(options: tuple[Option, ...], option_id: str,
                 value: str) -> tuple[Option, ...]:
    """``options`` with ``option_id``'s current value set to ``value``."""
    return tuple({**o, "current": value} if o["id"] == option_id else o for o in options)


def check_choice(options: tuple[Option, ...], option_id: str, value: str) -> Option:
    """The option ``option_id``, if ``value`` is one of its choices; else ValueError."""
    option = next((o for o in options if o["id"] == option_id), None)
    if option is None:
        known = ", ".join(o["id"] for o in options) or "none"
        raise ValueError(f"the agent offers no option {option_id!r} (offered: {known})")
    values = [c["value"] for c in option["choices"]]
    if value not in values:
        raise ValueError(f"{value!r} is not a choice of option {option_id!r} "
                         f"(choices: {', '.join(values)})")
    return option


# -- Codex -------------------------------------------------------------------------


def _codex_models(listed: object) -> list[dict[str, Any]]:
    data = listed.get("data") if isinstance(listed, dict) else None
    return [m for m in data if isinstance(m, dict) and not m.get("hidden")
            and isinstance(m.get("model") or m.get("id"), str)] if isinstance(data, list) else []


def _model_value(model: dict[str, Any]) -> str:
    return str(model.get("model") or model.get("id"))


def codex_options(model: str | None, effort: str | None, policy: str | None,
                  listed: object = None) -> tuple[Option, ...]:
    """Codex's options: ``model`` (choices from ``model/list``'s answer ``listed``,
    else the thread's model alone), ``reasoning_effort`` (the chosen model's
    supported efforts, else ``DEFAULT_EFFORTS``; current: the thread's, else
    the model's default), ``approval_policy``."""
    models = _codex_models(listed)
    chosen = next((m for m in models if model in (_model_value(m), m.get("id"))), None)
    if chosen is None and model is None:
        chosen = next((m for m in models if m.get("isDefault")), None)
    if chosen is not None:
        model = _model_value(chosen)
    model_choices = [_choice(_model_value(m), m.get("displayName"), m.get("description"))
                     for m in models]
    efforts: list[dict[str, Any]] = []
    for e in (chosen or {}).get("supportedReasoningEfforts") or ():
        value = _str(e.get("reasoningEffort")) if isinstance(e, dict) else _str(e)
        if value is not None:
            efforts.append(_choice(value, value, e.get("description")
                                   if isinstance(e, dict) else None))
    if not efforts:
        efforts = [_choice(e, e, None) for e in DEFAULT_EFFORTS]
    if effort is None and chosen is not None:
        effort = _str(chosen.get("defaultReasoningEffort"))
    options: list[Option] = []
    if model is not None or model_choices:
        options.append(_option("model", "Model", "model", model, model_choices))
    options.append(_option("reasoning_effort", "Reasoning effort", "reasoning_effort",
                           effort, efforts))
    options.append(_option("approval_policy", "Approval policy", "approval_policy", policy,
                           [_choice(p, p, None) for p in APPROVAL_POLICIES]))
    return tuple(options)


# -- commands, usage, titles ---------------------------------------------------------


def acp_commands(update: dict[str, Any]) -> tuple[dict[str, Any], ...] | None:
    """An ``available_commands_update``'s commands; None if it has no list."""
    listed = update.get("availableCommands")
    if not isinstance(listed, list):
        return None
    commands = []
    for c in listed:
        if not isinstance(c, dict) or not _str(c.get("name")):
            continue
        given = c.get("input")
        hint = _str(given.get("hint")) if isinstance(given, dict) else None
        commands.append({"name": c["name"], "description": _str(c.get("description")) or "",
                         "input_hint": hint})
    return tuple(commands)


def _count(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _usage(input_tokens: object = None, output_tokens: object = None,
           context_used: object = None, context_size: object = None,
           cost: object = None) -> dict[str, Any]:
    amount = cost.get("amount") if isinstance(cost, dict) else None
    currency = cost.get("currency") if isinstance(cost, dict) else None
    known_cost = ({"amount": amount, "currency": currency}
                  if isinstance(amount, int | float) and not isinstance(amount, bool)
                  and isinstance(currency, str) else None)
    return {"input_tokens": _count(input_tokens), "output_tokens": _count(output_tokens),
            "context_used": _count(context_used), "context_size": _count(context_size),
            "cost": known_cost}


def acp_usage(update: dict[str, Any]) -> dict[str, Any] | None:
    """A ``usage_update`` (``used``, ``size``, ``cost``) as our usage; None if it
    says neither how full the context is nor what it cost."""
    usage = _usage(context_used=update.get("used"), context_size=update.get("size"),
                   cost=update.get("cost"))
    if usage["context_used"] is None and usage["context_size"] is None and not usage["cost"]:
        return None
    return usage


def codex_usage(params: dict[str, Any]) -> dict[str, Any] | None:
    """``thread/tokenUsage/updated``'s ``tokenUsage`` (``total`` and ``last``
    breakdowns, ``modelContextWindow``) as our usage: the thread's tokens in
    and out so far, and the context its last request filled (as Codex's own
    status line counts it); None if it has no usage."""
    usage = params.get("tokenUsage")
    if not isinstance(usage, dict):
        return None
    total, last = usage.get("total"), usage.get("last")
    total = total if isinstance(total, dict) else {}
    last = last if isinstance(last, dict) else {}
    read = _usage(total.get("inputTokens"), total.get("outputTokens"),
                  last.get("totalTokens"), usage.get("modelContextWindow"))
    return read if any(v is not None for v in read.values()) else None


def acp_title(update: dict[str, Any]) -> str | None:
    """A ``session_info_update``'s title (None: it names none, or clears it)."""
    title = _str(update.get("title"))
    return title.strip() or None if title is not None else None

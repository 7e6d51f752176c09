"""What the mock agent offers a session: a mode and a model, in each dialect's shape.

ACP v1: ``configOptions`` (``id``), set with ``session/set_config_option``; with
``--legacy-options`` the older ``modes`` and ``models`` instead, set with
``session/set_mode`` / ``session/set_model`` (and ``set_config_option`` is then
not served, nor the legacy calls without the flag: a client that uses the wrong
one is told so).  ACP v2: ``configOptions`` (``configId``) always, v2 having no
legacy shapes; ``set_config_option`` takes ``type: "id"``.  Codex: the thread's
``model``, ``reasoningEffort`` and ``approvalPolicy``, and ``model/list``.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["DEFAULTS", "MODELS", "MODES", "codex_models", "config_options", "legacy_shapes",
           "offer", "valid"]

#: (value, name, description)
MODES: Final = (("default", "Default", "Asks before it writes"),
                ("plan", "Plan", "Plans only, writes nothing"),
                ("yolo", "YOLO", "Asks for nothing"))
MODELS: Final = (("mock-fast", "Mock Fast", "Quick answers"),
                 ("mock-smart", "Mock Smart", "Careful answers"))
#: Each model's reasoning efforts (Codex's ``model/list``).
EFFORTS: Final = {"mock-fast": ("low", "medium"), "mock-smart": ("low", "medium", "high")}
DEFAULTS: Final = {"mode": "default", "model": "mock-fast"}
_CHOICES: Final = {"mode": MODES, "model": MODELS}


def valid(option_id: object, value: object) -> bool:
    return isinstance(option_id, str) and any(
        v == value for v, _, _ in _CHOICES.get(option_id, ()))


def config_options(values: dict[str, str], version: int) -> list[dict[str, Any]]:
    key = "configId" if version == 2 else "id"
    return [{key: option_id, "name": option_id.capitalize(), "category": option_id,
             "type": "select", "currentValue": values[option_id],
             "options": [{"value": v, "name": n, "description": d} for v, n, d in choices]}
            for option_id, choices in _CHOICES.items()]


def legacy_shapes(values: dict[str, str]) -> dict[str, Any]:
    return {
        "modes": {"currentModeId": values["mode"], "availableModes": [
            {"id": v, "name": n, "description": d} for v, n, d in MODES]},
        "models": {"currentModelId": values["model"], "availableModels": [
            {"modelId": v, "name": n, "description": d} for v, n, d in MODELS]},
    }


def offer(values: dict[str, str], version: int, legacy: bool) -> dict[str, Any]:
    """The members a session answer (new, load, resume) offers its options in."""
    if legacy and version == 1:
        return legacy_shapes(values)
    return {"configOptions": config_options(values, version)}


def codex_models() -> dict[str, Any]:
    """``model/list``'s answer."""
    return {"data": [
        {"id": v, "model": v, "displayName": n, "description": d, "hidden": False,
         "isDefault": v == DEFAULTS["model"], "defaultReasoningEffort": "medium",
         "supportedReasoningEfforts": [{"reasoningEffort": e, "description": f"{e} effort"}
                                       for e in EFFORTS[v]]}
        for v, n, d in MODELS], "nextCursor": None}

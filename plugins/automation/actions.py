"""A rule's actions done through the other plugins' contracts: notify, operate a device, post a
message, run a scene, call an address, ask the assistant (docs/automation.md).

Every action reports `{"type", "ok", "detail"}` or `{"type", "ok": false, "error"}`; one
failing action does not stop the next (a rule that switches the AC on and tells you still
tells you when the AC is offline, and says so)."""
from __future__ import annotations

import logging
import re
from typing import Any, cast

import aiopg
import marshmallow

from gateway.context import Context
from gateway.errors import ApiError
from gateway.fetch import FetchError, GuardedFetcher
from gateway.fetch_policy import FetchPolicy
from plugins.chat.contract import CHAT_TURNS, TurnFailed, may_chat
from plugins.iot.contract import DEVICES
from plugins.notifications.contract import NOTIFICATIONS
from plugins.sessions.contract import CONVERSATIONS

from . import store
from .definitions import ACTIONS, action_list
from .settings import AutomationSettings

log = logging.getLogger("plugins.automation")

DEFAULT_SESSION = "automation"
SESSION_TITLE = "Automation"
MAX_SCENE_DEPTH = 3           # a scene may run a scene that runs a scene; no deeper, and never itself again
HTTP_DETAIL_CHARS = 300
REPLY_DETAIL_CHARS = 300


def _message_session(action: dict) -> str:
    """The session a `message` action speaks into."""
    return action.get("session_id") or DEFAULT_SESSION


class ActionFailed(Exception):
    """An action that could not do its work; the message goes into the run's results."""


def loaded_action(raw: Any) -> dict:
    """A saved action with its defaults; one that no longer loads (a type since removed) fails."""
    try:
        return cast(dict, ACTIONS[raw["type"]]().load(raw))
    except (KeyError, TypeError, marshmallow.ValidationError) as error:
        raise ActionFailed(f"this action cannot be run: {error}") from None


_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_.]+)\s*\}\}")
TEXT_FIELDS = ("title", "body", "text", "prompt")


def template_values(rule_name: str, detail: dict) -> dict:
    """What `{{...}}` may name in a rule's texts: `rule`, and what fired it (`to`, `from`,
    `device_id`, `property`, `event`, `payload.<key>`, `due_at`...)."""
    values: dict[str, Any] = {"rule": rule_name}
    for key, value in detail.items():
        if isinstance(value, dict):
            values.update({f"{key}.{inner_key}": inner for inner_key, inner in value.items()
                           if isinstance(inner, (str, int, float, bool))})
        elif isinstance(value, (str, int, float, bool)):
            values[key] = value
    return values


def filled(action: dict, values: dict) -> dict:
    """The action with `{{name}}` in its texts replaced; a name not known stays as written."""
    def fill(text: str) -> str:
        return _PLACEHOLDER.sub(lambda match: str(values[match.group(1)]) if match.group(1) in values
                                else match.group(0), text)
    return {key: fill(value) if key in TEXT_FIELDS and isinstance(value, str) else value
            for key, value in action.items()}


class Actions:
    """Runs lists of actions for the rules and scenes of the runner."""

    def __init__(self, context: Context, settings: AutomationSettings):
        self.context = context
        self.settings = settings

    @property
    def db(self) -> aiopg.Pool:
        return self.context.db

    async def scene_results(self, scene: dict, scenes_seen: tuple[str, ...]) -> list[dict]:
        """A scene's own actions, then the actions of each of its rules."""
        results = await self.run_actions(scene["user_id"], scene["actions"], source=f"scene:{scene['id']}",
                                         scenes_seen=scenes_seen)
        for rule_id in scene["rule_ids"]:
            rule = await store.get_rule(self.db, rule_id, scene["user_id"])
            if rule is None:
                continue
            for result in await self.run_actions(scene["user_id"], action_list(rule["actions"]), source=rule["id"],
                                                 scenes_seen=scenes_seen):
                results.append({**result, "rule_id": rule_id})
        return results

    async def run_actions(self, user_id: str, actions: list[dict], *, source: str,
                          scenes_seen: tuple[str, ...], values: dict | None = None) -> list[dict]:
        results: list[dict] = []
        # Consecutive `message` actions into one session are said together: posted at once, the
        # person's devices get them as one `multi_message` (CHAT_TURNS.post_messages).
        messages: list[dict] = []

        async def post_messages() -> None:
            if messages:
                results.extend(await self._messages(user_id, messages, source))
                messages.clear()

        for raw in actions:
            action = {"type": str(raw.get("type")) if isinstance(raw, dict) else "unknown"}
            try:
                action = filled(loaded_action(raw), values or {})  # defaults and {{placeholders}} filled in
                if action["type"] == "message":
                    if messages and _message_session(messages[0]) != _message_session(action):
                        await post_messages()
                    messages.append(action)
                    continue
                await post_messages()
                outcome = await self._act(user_id, action, source, scenes_seen)
                results.append({"type": action["type"], "ok": True, **outcome})
            except ActionFailed as failure:
                await post_messages()
                results.append({"type": action["type"], "ok": False, "error": str(failure)})
            except Exception as error:  # an action's bug must not lose the run log or the next actions
                log.exception("automation action %s of %s failed", action["type"], source)
                await post_messages()
                results.append({"type": action["type"], "ok": False, "error": f"unexpected failure: {error}"})
        await post_messages()
        return results

    async def _act(self, user_id: str, action: dict, source: str, scenes_seen: tuple[str, ...]) -> dict:
        kind = action["type"]
        if kind == "notify":
            return await self._notify(user_id, action, source)
        if kind == "device":
            return await self._operate(user_id, action, source)
        if kind == "message":
            return await self._message(user_id, action, source)
        if kind == "scene":
            return await self._scene(user_id, action, scenes_seen)
        if kind == "http":
            return await self._http(action)
        if kind == "assistant":
            return await self._assistant(user_id, action, source)
        raise ActionFailed(f"unknown action type {kind!r}")

    async def _notify(self, user_id: str, action: dict, source: str) -> dict:
        notifications = self.context.contracts.get(NOTIFICATIONS)
        if notifications is None:
            raise ActionFailed("this gateway has no notifications feature")
        notification = await notifications.push(user_id, action["level"], action["title"], action["body"],
                                                {"source": f"automation:{source}"})
        return {"detail": f"notified: {action['title']}", "notification_id": notification["id"]}

    async def _operate(self, user_id: str, action: dict, source: str) -> dict:
        devices = self.context.contracts.get(DEVICES)
        if devices is None:
            raise ActionFailed("this gateway has no devices feature")
        operation: dict[str, Any] = {"action": action["action"]}
        for key in ("property", "properties", "value"):
            if action.get(key) is not None:
                operation[key] = action[key]
        try:
            answer = await devices.operate(user_id, action["device_id"], operation, source=f"automation:{source}")
        except ApiError as error:
            raise ActionFailed(f"{action['device_id']}: {error.error}") from None
        changes = (answer.get("operation") or {}).get("changes") or {}
        said = ", ".join(f"{name} {change.get('from')!r} → {change.get('to')!r}" for name, change in changes.items())
        return {"detail": f"{action['device_id']}: {said or 'no change'}",
                "operation_id": str((answer.get("operation") or {}).get("id") or "")}

    async def _message(self, user_id: str, action: dict, source: str) -> dict:
        result = (await self._messages(user_id, [action], source))[0]
        if not result["ok"]:
            raise ActionFailed(result["error"])
        return {key: value for key, value in result.items() if key not in ("type", "ok")}

    async def _messages(self, user_id: str, actions: list[dict], source: str) -> list[dict]:
        """The results of `message` actions into one session, posted together; never raises.
        When storing fails part-way, those before were posted, yet all are reported failed."""
        session_id = _message_session(actions[0])
        try:
            chat = self.context.contracts.get(CHAT_TURNS)
            if chat is None:
                raise ActionFailed("this gateway has no chat feature")
            try:
                stored = await chat.post_messages(user_id, session_id, [action["text"] for action in actions],
                                                  metadata={"source": f"automation:{source}"},
                                                  title=SESSION_TITLE if session_id == DEFAULT_SESSION else None)
            except ApiError as error:
                raise ActionFailed(error.error) from None
        except ActionFailed as failure:
            return [{"type": "message", "ok": False, "error": str(failure)} for _ in actions]
        except Exception as error:
            log.exception("automation messages of %s failed", source)
            return [{"type": "message", "ok": False, "error": f"unexpected failure: {error}"} for _ in actions]
        return [{"type": "message", "ok": True, "detail": f"posted into session {session_id}",
                 "message_id": str(message["id"])} for message in stored]

    async def _scene(self, user_id: str, action: dict, scenes_seen: tuple[str, ...]) -> dict:
        scene_id = action["scene_id"]
        if scene_id in scenes_seen:
            raise ActionFailed(f"scene {scene_id} is already running in this run (a scene cannot run itself)")
        if len(scenes_seen) >= MAX_SCENE_DEPTH:
            raise ActionFailed(f"scenes nest at most {MAX_SCENE_DEPTH} deep")
        scene = await store.get_scene(self.db, scene_id, user_id)
        if scene is None:
            raise ActionFailed(f"scene {scene_id} no longer exists")
        results = await self.scene_results(scene, (*scenes_seen, scene_id))
        succeeded = sum(1 for result in results if result["ok"])
        if results and succeeded == 0:
            raise ActionFailed(f"scene {scene['name']!r}: none of its {len(results)} actions succeeded")
        return {"detail": f"ran scene {scene['name']!r}: {succeeded} of {len(results)} actions succeeded",
                "results": results}

    async def _http(self, action: dict) -> dict:
        config = self.context.config
        policy = FetchPolicy.from_config(config, hosts=self.settings.http_hosts,
                                         hosts_setting="[plugins.automation] http_hosts")
        fetcher = GuardedFetcher.for_context(self.context, policy=policy, timeout=self.settings.http_timeout)
        body = action.get("body")
        try:
            result = await fetcher.fetch(action["url"], method=action["method"],
                                         headers={"User-Agent": "assistant-gateway automation", **action["headers"]},
                                         json_body=body if action["method"] != "GET" else None)
        except FetchError as error:
            raise ActionFailed(f"{action['method']} {action['url']}: {error}") from None
        text = result.text()[:HTTP_DETAIL_CHARS]
        if not result.ok:
            raise ActionFailed(f"{action['method']} {action['url']} answered {result.status}: {text}")
        return {"detail": f"{action['method']} {action['url']} answered {result.status}", "status": result.status,
                "response": text}

    async def _assistant(self, user_id: str, action: dict, source: str) -> dict:
        chat = self.context.contracts.get(CHAT_TURNS)
        if chat is None:
            raise ActionFailed("this gateway has no chat feature")
        if not may_chat(self.context.config, user_id):  # a rule saved before, or a scene's action
            raise ActionFailed(f"{user_id} may not chat with the assistant (limited to the administrator "
                               "unless [auth] chat_for_all_users is on)")
        session_id = action.get("session_id") or DEFAULT_SESSION
        conversations = self.context.contracts.require(CONVERSATIONS)
        await conversations.ensure_session(user_id, session_id,
                                           title=SESSION_TITLE if session_id == DEFAULT_SESSION else None)
        try:
            reply = await chat.submit_and_wait(user_id, session_id, action["prompt"],
                                               metadata={"source": f"automation:{source}"},
                                               timeout=self.settings.assistant_timeout)
        except TurnFailed as failure:
            raise ActionFailed(f"the assistant did not answer: {failure.error}") from None
        except ApiError as error:
            raise ActionFailed(error.error) from None
        delivered = [f"session {session_id}"]
        if "notification" in action["deliver"]:
            notifications = self.context.contracts.get(NOTIFICATIONS)
            if notifications is not None:
                await notifications.push(user_id, "info", action["prompt"][:200], reply.text[:4000],
                                         {"source": f"automation:{source}", "session_id": session_id})
                delivered.append("a notification")
        return {"detail": f"the assistant replied ({' and '.join(delivered)}): {reply.text[:REPLY_DETAIL_CHARS]}",
                "reply": reply.text}

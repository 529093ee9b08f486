"""Running rules: checking their conditions, doing their actions through the other plugins'
contracts, and writing what happened to the run log. Triggers (the clock, device changes,
named events, a person's request) all end here, so a rule does the same thing however it
fired.

Every action reports `{"type", "ok", "detail"}` or `{"type", "ok": false, "error"}`; one
failing action does not stop the next (a rule that switches the AC on and tells you still
tells you when the AC is offline, and says so)."""
from __future__ import annotations

import asyncio
import logging
import re
import zoneinfo
from datetime import datetime, timedelta
from typing import Any

import marshmallow

from gateway.context import Context
from gateway.errors import ApiError, NotFound
from gateway.fetch import FetchError, GuardedFetcher
from gateway.fetch_policy import FetchPolicy
from gateway.clock import rfc3339
from gateway.schedule import DueLoop, judge_lateness
from plugins.auth.contract import PERSON_ZONES
from plugins.chat.contract import CHAT_TURNS, TurnFailed, may_chat
from plugins.iot.contract import DEVICES, DeviceChange
from plugins.notifications.contract import NOTIFICATIONS
from plugins.sessions.contract import CONVERSATIONS

from . import store
from .definitions import ACTIONS, action_list, check_conditions, compare, crossed
from .timing import next_after, parse_clock

log = logging.getLogger("plugins.automation")

DEFAULT_SESSION = "automation"
SESSION_TITLE = "Automation"
MAX_SCENE_DEPTH = 3           # a scene may run a scene that runs a scene; no deeper, and never itself again
HTTP_DETAIL_CHARS = 300
REPLY_DETAIL_CHARS = 300
CLAIM_BATCH = 50
PRUNE_EVERY_ROUNDS = 100
WEEKDAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def _message_session(action: dict) -> str:
    """The session a `message` action speaks into."""
    return action.get("session_id") or DEFAULT_SESSION


class ActionFailed(Exception):
    """An action that could not do its work; the message goes into the run's results."""


def loaded_action(raw: Any) -> dict:
    """A saved action with its defaults; one that no longer loads (a type since removed) fails."""
    try:
        return ACTIONS[raw["type"]]().load(raw)
    except (KeyError, TypeError, marshmallow.ValidationError) as error:
        raise ActionFailed(f"this action cannot be run: {error}") from None


def loaded_conditions(raw: Any) -> dict | None:
    try:
        return check_conditions(raw)
    except ApiError as error:
        raise ActionFailed(f"the conditions cannot be checked: {error.error}") from None


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


class Runner:
    """Provided to the routes and the triggers under one app key. Every decision reads the
    scheduler core's clock (`context.clock`), which tests set and move."""

    def __init__(self, context: Context, settings: dict):
        self.context = context
        self.settings = settings
        self.due_loop: DueLoop | None = None
        self.rounds = 0

    def now(self) -> datetime:
        return self.context.clock.now()

    @property
    def db(self):
        return self.context.db

    async def zone_for(self, user_id: str, config: dict) -> str:
        """The zone a trigger or condition names, else the person's (their profile's, through
        the auth plugin's PERSON_ZONES), else UTC where no auth plugin runs."""
        if config.get("timezone"):
            return str(config["timezone"])
        zones = self.context.contracts.get(PERSON_ZONES)
        return await zones.zone_of(user_id) if zones is not None else "UTC"

    # ------------------------------------------------------------ a whole run

    async def run_rule(self, rule: dict, trigger: str, detail: dict | None = None, *,
                       check_conditions: bool = True, change: DeviceChange | None = None) -> dict:
        """Check the conditions (unless asked to run now), do the actions, log the run."""
        detail = dict(detail or {})
        note = str(detail.pop("note", ""))
        started = self.now()
        if check_conditions and rule["conditions"]:
            try:
                conditions = loaded_conditions(rule["conditions"])
                holds, why = (True, "") if conditions is None else await self.condition_holds(
                    rule["user_id"], conditions, change)
            except ActionFailed as failure:
                holds, why = False, str(failure)
            if not holds:
                return await store.record_run(self.db, rule["user_id"], rule["id"], trigger, detail, "skipped",
                                              f"conditions not met: {why}", started)
        run_id = await store.start_run(self.db, rule["user_id"], rule["id"], None, trigger, detail, started)
        results = await self.run_actions(rule["user_id"], action_list(rule["actions"]), source=rule["id"],
                                         scenes_seen=(), values=template_values(rule["name"], detail))
        await store.mark_ran(self.db, rule["id"], started)
        return await self._finish(run_id, results, note)

    async def run_scene(self, scene: dict, trigger: str = "scene", detail: dict | None = None) -> dict:
        """A scene's own actions, then the actions of each of its rules, in order (no conditions:
        running a scene is asking for it now)."""
        run_id = await store.start_run(self.db, scene["user_id"], None, scene["id"], trigger, detail or {}, self.now())
        results = await self._scene_results(scene, (scene["id"],))
        return await self._finish(run_id, results, "")

    async def _finish(self, run_id: int, results: list[dict], note: str) -> dict:
        succeeded = sum(1 for result in results if result["ok"])
        status = "succeeded" if succeeded == len(results) else "failed" if succeeded == 0 else "partial"
        return await store.finish_run(self.db, run_id, status, note, results, self.now())

    async def _scene_results(self, scene: dict, scenes_seen: tuple[str, ...]) -> list[dict]:
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

    # ------------------------------------------------------------ conditions

    async def condition_holds(self, user_id: str, condition: dict, change: DeviceChange | None) -> tuple[bool, str]:
        """Whether the condition holds now, and in words why not."""
        kind = condition["type"]
        if kind in ("all", "any"):
            reasons = []
            for inner in condition["conditions"]:
                holds, why = await self.condition_holds(user_id, inner, change)
                if holds and kind == "any":
                    return True, ""
                if not holds and kind == "all":
                    return False, why
                reasons.append(why)
            return (True, "") if kind == "all" else (False, "none of: " + "; ".join(reasons))
        if kind == "time_window":
            return self._in_window(condition, await self.zone_for(user_id, condition))
        return await self._device_condition(user_id, condition, change)

    def _in_window(self, condition: dict, zone: str) -> tuple[bool, str]:
        local = self.now().astimezone(zoneinfo.ZoneInfo(zone))
        start, end, clock = parse_clock(condition["start"]), parse_clock(condition["end"]), local.time()
        if start <= end:
            inside = start <= clock < end
        else:  # past midnight: 22:00-06:00
            inside = clock >= start or clock < end
        weekdays = condition.get("weekdays")
        if inside and weekdays and WEEKDAY_NAMES[local.weekday()] not in weekdays:
            return False, f"{WEEKDAY_NAMES[local.weekday()]} is not one of {', '.join(weekdays)}"
        if not inside:
            return False, f"{local:%H:%M} ({zone}) is outside {condition['start']}-{condition['end']}"
        return True, ""

    async def _device_condition(self, user_id: str, condition: dict, change: DeviceChange | None) -> tuple[bool, str]:
        if change is not None and change.user_id == user_id and change.device_id == condition["device_id"]:
            device = change.device
        else:
            device = await self._device(user_id, condition["device_id"])
        value = (device.get("state") or {}).get(condition["property"])
        if compare(value, condition):
            return True, ""
        wanted = next(f"{key} {condition[key]}" for key in ("above", "below", "equals")
                      if condition.get(key) is not None)
        return False, f"{condition['device_id']}.{condition['property']} is {value!r}, not {wanted}"

    async def _device(self, user_id: str, device_id: str) -> dict:
        devices = self.context.contracts.get(DEVICES)
        if devices is None:
            raise ActionFailed("this gateway has no devices feature")
        try:
            return await devices.get(user_id, device_id)
        except ApiError as error:
            raise ActionFailed(f"{device_id}: {error.error}") from None

    # ------------------------------------------------------------ actions

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
        results = await self._scene_results(scene, (*scenes_seen, scene_id))
        succeeded = sum(1 for result in results if result["ok"])
        if results and succeeded == 0:
            raise ActionFailed(f"scene {scene['name']!r}: none of its {len(results)} actions succeeded")
        return {"detail": f"ran scene {scene['name']!r}: {succeeded} of {len(results)} actions succeeded",
                "results": results}

    async def _http(self, action: dict) -> dict:
        config = self.context.config
        fetcher = GuardedFetcher.for_context(self.context, policy=FetchPolicy.from_config(config, purpose="automation"),
                                             timeout=self.settings["http_timeout"])
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
                                               timeout=self.settings["assistant_timeout"])
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

    # ------------------------------------------------------------ triggers that are not the clock

    async def on_device_change(self, change: DeviceChange) -> None:
        """Fire each of the owner's device-state rules this change makes true, once per
        (rule, change) across instances; the actions run off the feed's back."""
        rules = await store.rules_listening(self.db, change.user_id, "device_state")
        for rule in rules:
            config = rule["trigger_config"]
            if config.get("device_id") != change.device_id or config.get("property") not in change.changes:
                continue
            if not crossed(change.changes[config["property"]], config):
                continue
            if not await store.claim_device_change(self.db, rule["id"], change.event_id):
                continue
            detail = {"event_id": change.event_id, "device_id": change.device_id, "property": config["property"],
                      **{key: change.changes[config["property"]].get(key) for key in ("from", "to")},
                      "cause": change.cause, "timestamp": change.timestamp}
            await self._spawn(self.run_rule(rule, "device_state", detail, change=change))

    async def fire_event(self, user_id: str, name: str, payload: dict) -> list[dict]:
        """Run every enabled rule of the person listening for this event; their runs."""
        runs = []
        for rule in await store.rules_listening(self.db, user_id, "event"):
            if rule["trigger_config"].get("event") == name:
                runs.append(await self.run_rule(rule, "event", {"event": name, "payload": payload}))
        return runs

    # ------------------------------------------------------------ the clock

    async def _following(self, rule: dict, after: datetime) -> datetime | None:
        config = rule["trigger_config"]
        return next_after(config, await self.zone_for(rule["user_id"], config), after)

    async def claim_and_fire(self) -> datetime | None:
        """The due loop's call: claim the due time rules (FOR UPDATE SKIP LOCKED: each due
        instant goes to one instance), move each to its next occurrence in the same
        transaction, and fire it, late and saying so within the grace window, or skip and record
        it when older (the gateway was down). Returns when the next rule is due."""
        grace = timedelta(seconds=self.settings["grace_seconds"])
        while True:
            now = self.now()
            claimed = await store.claim_due_rules(self.db, now, CLAIM_BATCH, self._following)
            for rule, due_at in claimed:
                lateness = judge_lateness(due_at, now, grace)
                detail: dict[str, Any] = {"due_at": rfc3339(due_at), "late": lateness.verdict == "late",
                                          "late_by_seconds": lateness.late_by_seconds}
                if not lateness.fires:
                    await store.record_run(self.db, rule["user_id"], rule["id"], "time", detail, "skipped",
                                           f"missed: due at {detail['due_at']}, {lateness.late_by_seconds}s ago, "
                                           f"past the grace window of {grace.total_seconds():g}s "
                                           "(the gateway was not running)", now)
                    continue
                if lateness.verdict == "late":
                    detail["note"] = (f"ran {lateness.late_by_seconds}s late (within the grace window of "
                                      f"{grace.total_seconds():g}s)")
                await self._spawn(self.run_rule(rule, "time", detail))
            if len(claimed) < CLAIM_BATCH:
                break
        self.rounds += 1
        if self.rounds % PRUNE_EVERY_ROUNDS == 1:
            await store.prune_claims(self.db)
            await store.prune_runs(self.db, self.settings["runs_kept"])
        return await store.next_due(self.db)

    async def rules_changed(self, next_run_at: datetime | str | None) -> None:
        """A rule became due, maybe sooner than the loops plan: wake them, on every instance."""
        if isinstance(next_run_at, str):
            next_run_at = datetime.fromisoformat(next_run_at.replace("Z", "+00:00"))
        if next_run_at is not None and self.due_loop is not None:
            await self.due_loop.notify_due(next_run_at)

    async def time_loop(self, context: Context) -> None:
        self.due_loop = DueLoop(context, "automation", self.claim_and_fire, max_sleep=self.settings["poll_interval"])
        await self.due_loop.run()

    async def _spawn(self, work) -> None:
        scheduler = self.context.scheduler
        await scheduler.spawn(self._logged(work))

    @staticmethod
    async def _logged(work) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("an automation run failed")


def not_found(kind: str) -> NotFound:
    return NotFound(f"{kind.capitalize()} not found.", error_type=f"{kind}_not_found",
                    hint=f"List your {kind}s with GET /api/v1/automation/{kind}s.")


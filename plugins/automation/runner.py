"""Running rules: checking their conditions (conditions.py), doing their actions through the
other plugins' contracts (actions.py), and writing what happened to the run log. Triggers (the
clock, device changes, named events, a person's request) all end here, so a rule does the same
thing however it fired."""
from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any, Coroutine

import aiopg

from gateway.clock import rfc3339
from gateway.context import Context
from gateway.errors import NotFound
from gateway.jobs import run_logged
from gateway.schedule import DueLoop, judge_lateness
from plugins.iot.contract import DeviceChange

from . import store
from .actions import ActionFailed, Actions, template_values
from .conditions import Conditions, loaded_conditions, zone_for
from .definitions import action_list, crossed
from .timing import next_after
from .settings import AutomationSettings

log = logging.getLogger("plugins.automation")

CLAIM_BATCH = 50
PRUNE_EVERY_ROUNDS = 100


class Runner:
    """Provided to the routes and the triggers under one app key. Every decision reads the
    scheduler core's clock (`context.clock`), which tests set and move."""

    def __init__(self, context: Context, settings: AutomationSettings):
        self.context = context
        self.settings = settings
        self.due_loop: DueLoop | None = None
        self.rounds = 0
        self.actions = Actions(context, settings)
        self.conditions = Conditions(context)

    def now(self) -> datetime:
        return self.context.clock.now()

    @property
    def db(self) -> aiopg.Pool:
        return self.context.db

    async def zone_for(self, user_id: str, config: dict) -> str:
        """The zone a trigger names, else the person's (conditions.py, `zone_for`)."""
        return await zone_for(self.context, user_id, config)

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
                holds, why = (True, "") if conditions is None else await self.conditions.condition_holds(
                    rule["user_id"], conditions, change)
            except ActionFailed as failure:
                holds, why = False, str(failure)
            if not holds:
                return await store.record_run(self.db, rule["user_id"], rule["id"], trigger, detail, "skipped",
                                              f"conditions not met: {why}", started)
        run_id = await store.start_run(self.db, rule["user_id"], rule["id"], None, trigger, detail, started)
        results = await self.actions.run_actions(rule["user_id"], action_list(rule["actions"]), source=rule["id"],
                                                 scenes_seen=(), values=template_values(rule["name"], detail))
        await store.mark_ran(self.db, rule["id"], started)
        return await self._finish(run_id, results, note)

    async def run_scene(self, scene: dict, trigger: str = "scene", detail: dict | None = None) -> dict:
        """A scene's own actions, then the actions of each of its rules, in order (no conditions:
        running a scene is asking for it now)."""
        run_id = await store.start_run(self.db, scene["user_id"], None, scene["id"], trigger, detail or {}, self.now())
        results = await self.actions.scene_results(scene, (scene["id"],))
        return await self._finish(run_id, results, "")

    async def _finish(self, run_id: int, results: list[dict], note: str) -> dict:
        succeeded = sum(1 for result in results if result["ok"])
        status = "succeeded" if succeeded == len(results) else "failed" if succeeded == 0 else "partial"
        return await store.finish_run(self.db, run_id, status, note, results, self.now())
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
        grace = timedelta(seconds=self.settings.grace_seconds)
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
            await store.prune_runs(self.db, self.settings.runs_kept)
        return await store.next_due(self.db)

    async def rules_changed(self, next_run_at: datetime | str | None) -> None:
        """A rule became due, maybe sooner than the loops plan: wake them, on every instance."""
        if isinstance(next_run_at, str):
            next_run_at = datetime.fromisoformat(next_run_at.replace("Z", "+00:00"))
        if next_run_at is not None and self.due_loop is not None:
            await self.due_loop.notify_due(next_run_at)

    async def time_loop(self, context: Context) -> None:
        self.due_loop = DueLoop(context, "automation", self.claim_and_fire, max_sleep=self.settings.poll_interval)
        await self.due_loop.run()

    async def _spawn(self, work: Coroutine[Any, Any, object]) -> None:
        scheduler = self.context.scheduler
        await scheduler.spawn(run_logged("automation.run", work))


def not_found(kind: str) -> NotFound:
    return NotFound(f"{kind.capitalize()} not found.", error_type=f"{kind}_not_found",
                    hint=f"List your {kind}s with GET /api/v1/automation/{kind}s.")


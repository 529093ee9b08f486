"""Reminders: the spec's `/api/v1/reminders` endpoints, and a scheduler that fires each one at
its time as a `notification` of type `reminder` to every device of the person (kept in their
inbox), exactly once however many gateway instances run, and repeats it (daily, weekly, monthly,
on weekdays, or by a cron expression) on the clocks of the person's time zone.

The AI tools that set them are a plugin of the ai-core service (`assistant.py`). See docs/reminders.md."""
from __future__ import annotations

from aiohttp import web

from gateway.context import Context
from gateway.identity import Identity, owner_for, require_user
from gateway.openapi import api_doc
from gateway.plugins import Plugin, Registrar
from gateway.validation import parse_body, parse_query

from . import person_data
from .schemas import (ID_PATH, Deleted, ListQuery, Occurrences, OneReminder, OwnerQuery, ReminderBody,
                      ReminderPage, ReminderSettings, ReminderUpdate, Saved)
from .store import Reminders

REMINDERS = web.AppKey("reminders.store", Reminders)
routes = web.RouteTableDef()


def _owner(request: web.Request, caller: Identity) -> str:
    return owner_for(caller, parse_query(request, OwnerQuery())["user_id"])


def _owner_of_id(request: web.Request, caller: Identity) -> str | None:
    """Whose reminder a path names: the caller's own; the administrator's choice with user_id,
    and without it anyone's (None)."""
    requested = parse_query(request, OwnerQuery())["user_id"]
    if caller.is_admin and not requested:
        return None
    return owner_for(caller, requested)


@routes.get("/api/v1/reminders", name="reminders.list")
@api_doc("The caller's reminders, soonest first (the administrator: anyone's, with user_id)", query=ListQuery,
         responses={200: ReminderPage}, errors=(403, 503))
async def list_reminders(request: web.Request) -> web.Response:
    caller = await require_user(request)
    query = parse_query(request, ListQuery())
    owner = owner_for(caller, query["user_id"])
    return web.json_response(await request.config_dict[REMINDERS].page(owner, query["status"], query["limit"],
                                                                       query["offset"]))


@routes.post("/api/v1/reminders", name="reminders.create")
@api_doc("Create a reminder (the administrator and services: for user_id)", body=ReminderBody, query=OwnerQuery,
         responses={201: Saved}, errors=(403, 409, 503))
async def create_reminder(request: web.Request) -> web.Response:
    caller = await require_user(request)
    owner = _owner(request, caller)
    body = await parse_body(request, ReminderBody())
    reminder = await request.config_dict[REMINDERS].create(owner, body)
    return web.json_response({"success": True, "reminder": reminder}, status=201)


@routes.get("/api/v1/reminders/{reminder_id}", name="reminders.get")
@api_doc("One reminder", query=OwnerQuery, responses={200: OneReminder}, errors=(403, 404, 503), path=ID_PATH)
async def get_reminder(request: web.Request) -> web.Response:
    caller = await require_user(request)
    reminder = await request.config_dict[REMINDERS].get(_owner_of_id(request, caller), request.match_info["reminder_id"])
    return web.json_response({"reminder": reminder})


@routes.put("/api/v1/reminders/{reminder_id}", name="reminders.update")
@api_doc("Change a reminder (any fields); status completed or cancelled writes completed_at; a new remind_at "
         "snoozes it", body=ReminderUpdate, query=OwnerQuery, responses={200: Saved}, errors=(403, 404, 503),
         path=ID_PATH)
async def update_reminder(request: web.Request) -> web.Response:
    caller = await require_user(request)
    owner = _owner_of_id(request, caller)
    changes = await parse_body(request, ReminderUpdate())
    reminder = await request.config_dict[REMINDERS].update(owner, request.match_info["reminder_id"], changes)
    return web.json_response({"success": True, "reminder": reminder})


@routes.delete("/api/v1/reminders/{reminder_id}", name="reminders.delete")
@api_doc("Delete a reminder", query=OwnerQuery, responses={200: Deleted}, errors=(403, 404, 503), path=ID_PATH)
async def delete_reminder(request: web.Request) -> web.Response:
    caller = await require_user(request)
    await request.config_dict[REMINDERS].delete(_owner_of_id(request, caller), request.match_info["reminder_id"])
    return web.json_response({"success": True})


@routes.get("/api/v1/reminders/{reminder_id}/occurrences", name="reminders.occurrences")
@api_doc("What the scheduler did with a reminder's occurrences, newest first: fired, fired late, or skipped",
         query=OwnerQuery, responses={200: Occurrences}, errors=(403, 404, 503), path=ID_PATH)
async def list_occurrences(request: web.Request) -> web.Response:
    caller = await require_user(request)
    occurrences = await request.config_dict[REMINDERS].occurrences(_owner_of_id(request, caller),
                                                                   request.match_info["reminder_id"])
    return web.json_response({"occurrences": occurrences, "count": len(occurrences)})


class RemindersPlugin(Plugin):
    name = "reminders"
    depends = ("auth_tokens", "notifications")
    optional_depends = ("auth",)  # the person's time zone (PERSON_ZONES)
    settings_class = ReminderSettings
    description = "Reminders fired on time to every device of the person, repeats in their time zone"

    def setup(self, registrar: Registrar[ReminderSettings]) -> None:
        store = Reminders(registrar.context, registrar.settings)
        registrar.app_state(REMINDERS, store)
        registrar.routes(routes)
        registrar.migrations("plugins.reminders")
        person_data.register(registrar)

        async def scheduler(context: Context) -> None:
            await store.loop.run()

        registrar.job("scheduler", scheduler)


plugin = RemindersPlugin()

"""Every row of the spec's Reminders table, and each error: the fields, remind_at with an offset or
in the person's zone, the status filter and paging, partial PUT (completed/cancelled write
completed_at, a new remind_at snoozes), DELETE, 404 for unknown and foreign ids, each person
seeing only their own and the administrator choosing with user_id."""
import re

HEX32 = re.compile(r"^[0-9a-f]{32}$")
SPEC_FIELDS = {"id", "user_id", "title", "description", "remind_at", "status", "repeat_type", "session_id",
               "notified", "created_at", "completed_at"}


async def test_create_with_an_offset_or_in_the_persons_zone(gateway):
    reminder = await gateway.create(title="Call mom", description="her birthday", remind_at="2026-11-25T01:00:00Z",
                                    session_id="session_abc")
    assert SPEC_FIELDS <= set(reminder)
    assert HEX32.match(reminder["id"]) and reminder["user_id"] == "user_alice"
    assert reminder["remind_at"] == "2026-11-25T09:00:00+08:00"  # shown on the person's clocks
    assert (reminder["status"], reminder["repeat_type"], reminder["notified"]) == ("pending", "none", False)
    assert reminder["completed_at"] is None and reminder["session_id"] == "session_abc"
    assert reminder["created_at"] == "2026-11-24T06:00:00.000Z" and reminder["timezone"] == "Asia/Shanghai"
    assert reminder["next_run_at"] == "2026-11-25T01:00:00.000Z"
    # No offset: read in the person's zone (the deployment's default, until they set their own).
    local = await gateway.create(remind_at="2026-11-25T09:00")
    assert local["next_run_at"] == "2026-11-25T01:00:00.000Z"
    await gateway.call("PUT", "/profile", json={"timezone": "Europe/Berlin"})
    berlin = await gateway.create(remind_at="2026-11-25 09:00:00")
    assert berlin["remind_at"] == "2026-11-25T09:00:00+01:00" and berlin["timezone"] == "Europe/Berlin"
    # A zone given with the reminder wins.
    new_york = await gateway.create(remind_at="2026-11-25T09:00", timezone="America/New_York")
    assert new_york["next_run_at"] == "2026-11-25T14:00:00.000Z"
    # The default applies to Bob, who set none.
    assert (await gateway.create("bob", remind_at="2026-11-25T09:00"))["timezone"] == "Asia/Shanghai"
    # Extensions: weekdays and cron repeats.
    weekdays = await gateway.create(remind_at="2026-11-25T07:30", repeat_type="weekdays")
    assert weekdays["repeat_type"] == "weekdays"
    cron = await gateway.create(remind_at="2026-11-25T07:30", repeat_type="cron", repeat_rule="30 7 * * 1-5")
    assert cron["repeat_rule"] == "30 7 * * 1-5"


async def test_bad_bodies_are_400_and_store_nothing(gateway):
    cases = [
        ({"remind_at": "2026-11-25T09:00:00+08:00"}, "validation_error"),
        ({"title": "x"}, "validation_error"),
        ({"title": "", "remind_at": "2026-11-25T09:00"}, "validation_error"),
        ({"title": "x", "remind_at": "tomorrow at nine"}, "invalid_remind_at"),
        ({"title": "x", "remind_at": "2026-11-25"}, "invalid_remind_at"),
        ({"title": "x", "remind_at": "2026-13-45T09:00"}, "invalid_remind_at"),
        ({"title": "x", "remind_at": "2026-11-25T25:00"}, "invalid_remind_at"),
        ({"title": "x", "remind_at": 1764032400}, "validation_error"),
        ({"title": "x", "remind_at": "2026-11-25T09:00", "repeat_type": "hourly"}, "validation_error"),
        ({"title": "x", "remind_at": "2026-11-25T09:00", "repeat_type": "cron"}, "invalid_repeat"),
        ({"title": "x", "remind_at": "2026-11-25T09:00", "repeat_type": "cron", "repeat_rule": "every day"},
         "invalid_repeat"),
        ({"title": "x", "remind_at": "2026-11-25T09:00", "repeat_type": "cron", "repeat_rule": "0 0 30 2 *"},
         "invalid_repeat"),
        ({"title": "x", "remind_at": "2026-11-25T09:00", "timezone": "Mars/Olympus"}, "invalid_timezone"),
        ({"title": "x" * 201, "remind_at": "2026-11-25T09:00"}, "validation_error"),
    ]
    for body, error_type in cases:
        await gateway.error("POST", "/reminders", 400, error_type, json=body)
    await gateway.error("POST", "/reminders", 400, "invalid_json", data="{not json",
                        headers={"Content-Type": "application/json"})
    assert (await gateway.call("GET", "/reminders"))["total"] == 0
    assert (await gateway.client.get("/api/v1/reminders")).status == 401


async def test_list_filters_pages_and_keeps_people_apart(gateway):
    ids = [(await gateway.create(title=f"r{day}", remind_at=f"2026-12-{day:02d}T09:00"))["id"] for day in range(1, 6)]
    await gateway.create("bob", title="bob's")
    page = await gateway.call("GET", "/reminders")
    assert [r["title"] for r in page["reminders"]] == ["r1", "r2", "r3", "r4", "r5"]
    assert (page["count"], page["total"], page["limit"], page["offset"]) == (5, 5, 50, 0)
    page = await gateway.call("GET", "/reminders?limit=2&offset=2")
    assert [r["title"] for r in page["reminders"]] == ["r3", "r4"] and page["total"] == 5 and page["count"] == 2
    await gateway.call("PUT", f"/reminders/{ids[0]}", json={"status": "completed"})
    await gateway.call("PUT", f"/reminders/{ids[1]}", json={"status": "cancelled"})
    assert [r["title"] for r in (await gateway.call("GET", "/reminders?status=pending"))["reminders"]] == ["r3", "r4", "r5"]
    assert [r["title"] for r in (await gateway.call("GET", "/reminders?status=completed"))["reminders"]] == ["r1"]
    assert [r["title"] for r in (await gateway.call("GET", "/reminders?status=cancelled"))["reminders"]] == ["r2"]
    assert [r["title"] for r in (await gateway.call("GET", "/reminders", "bob"))["reminders"]] == ["bob's"]
    # The administrator: anyone's with user_id; Bob may not ask for Alice's.
    assert (await gateway.call("GET", "/reminders?user_id=user_alice", "admin"))["total"] == 5
    await gateway.error("GET", "/reminders?user_id=user_alice", 403, "forbidden", "bob")
    for query in ("status=done", "limit=0", "limit=201", "offset=-1", "limit=ten"):
        await gateway.error("GET", f"/reminders?{query}", 400, "validation_error")
    # The administrator creates one for Alice (as the assistant's tools do, with the service credential).
    made = await gateway.call("POST", "/reminders?user_id=user_alice", "admin", 201,
                              json={"title": "from admin", "remind_at": "2026-12-09T09:00"})
    assert made["reminder"]["user_id"] == "user_alice"
    response = await gateway.client.post("/api/v1/reminders?user_id=user_bob", json={
        "title": "from the service", "remind_at": "2026-12-09T09:00"},
        headers={"Authorization": "Bearer test-service-token"})
    assert response.status == 201 and (await response.json())["reminder"]["user_id"] == "user_bob"


async def test_put_is_partial_and_status_writes_completed_at(gateway):
    reminder = await gateway.create(description="ring twice")
    path = f"/reminders/{reminder['id']}"
    updated = (await gateway.call("PUT", path, json={"title": "Call mum"}))["reminder"]
    assert updated["title"] == "Call mum" and updated["description"] == "ring twice"
    assert updated["remind_at"] == reminder["remind_at"] and updated["created_at"] == reminder["created_at"]
    gateway.clock.advance(60)
    done = await gateway.call("PUT", path, json={"status": "completed"})
    assert done["success"] is True
    assert done["reminder"]["status"] == "completed" and done["reminder"]["completed_at"] == "2026-11-24T06:01:00.000Z"
    assert done["reminder"]["next_run_at"] is None
    gateway.clock.advance(60)
    cancelled = (await gateway.call("PUT", path, json={"status": "cancelled"}))["reminder"]
    assert cancelled["status"] == "cancelled" and cancelled["completed_at"] == "2026-11-24T06:02:00.000Z"
    reopened = (await gateway.call("PUT", path, json={"status": "pending"}))["reminder"]
    assert reopened["completed_at"] is None and reopened["next_run_at"] == "2026-11-25T01:00:00.000Z"
    # Snooze: a new remind_at (resets notified, fires again at the new time).
    snoozed = (await gateway.call("PUT", path, json={"remind_at": "2026-11-25T09:10:00+08:00"}))["reminder"]
    assert snoozed["remind_at"] == "2026-11-25T09:10:00+08:00" and snoozed["notified"] is False
    assert snoozed["next_run_at"] == "2026-11-25T01:10:00.000Z"
    repeating = (await gateway.call("PUT", path, json={"repeat_type": "daily"}))["reminder"]
    assert repeating["repeat_type"] == "daily"
    for body, error_type in (({"status": "done"}, "validation_error"), ({"remind_at": "soon"}, "invalid_remind_at"),
                             ({"repeat_type": "cron"}, "invalid_repeat"), ({"timezone": "X/Y"}, "invalid_timezone"),
                             ({"title": ""}, "validation_error"), ({"notified": True}, "validation_error")):
        await gateway.error("PUT", path, 400, error_type, json=body)
    assert (await gateway.reminder(reminder["id"]))["title"] == "Call mum"  # nothing half-saved


async def test_unknown_and_foreign_ids_are_404_and_delete_removes(gateway):
    mine = await gateway.create()
    for method in ("GET", "PUT", "DELETE"):
        for unknown in ("0" * 32, "not-an-id", mine["id"].upper()):
            await gateway.error(method, f"/reminders/{unknown}", 404, "reminder_not_found",
                                json={"title": "x"} if method == "PUT" else None)
        await gateway.error(method, f"/reminders/{mine['id']}", 404, "reminder_not_found", "bob",
                            json={"title": "x"} if method == "PUT" else None)
    await gateway.error("GET", f"/reminders/{mine['id']}/occurrences", 404, "reminder_not_found", "bob")
    # The administrator reaches it, with or without user_id.
    assert (await gateway.call("GET", f"/reminders/{mine['id']}", "admin"))["reminder"]["title"] == "Call mom"
    assert (await gateway.call("GET", f"/reminders/{mine['id']}?user_id=user_alice", "admin"))["reminder"]
    await gateway.error("GET", f"/reminders/{mine['id']}?user_id=user_bob", 404, "reminder_not_found", "admin")
    assert await gateway.call("DELETE", f"/reminders/{mine['id']}") == {"success": True}
    await gateway.error("GET", f"/reminders/{mine['id']}", 404, "reminder_not_found")
    await gateway.error("DELETE", f"/reminders/{mine['id']}", 404, "reminder_not_found")


async def test_too_many_pending_is_a_conflict(make_gateway):
    gateway = await make_gateway(max_pending=2)
    await gateway.create()
    await gateway.create()
    await gateway.error("POST", "/reminders", 409, "too_many_reminders",
                        json={"title": "third", "remind_at": "2026-11-25T09:00"})


OUT_OF_RANGE_TIMES = [
    {"remind_at": "0001-01-01T00:00:00", "timezone": "Asia/Shanghai"},        # OverflowError localising it
    {"remind_at": "9999-12-31T23:59:59", "timezone": "America/Los_Angeles"},  # OverflowError localising it
    {"remind_at": "0001-01-01T00:00:00Z"},       # stored, then its lateness overflowed the column
    {"remind_at": "9999-12-31T23:59:59+00:00"},  # stored, then shown in Asia/Shanghai: OverflowError
    {"remind_at": "1969-12-31T23:59:59Z"},
]


async def test_times_outside_the_years_that_can_be_scheduled_are_400(gateway):
    """Each was a 500 (the last two after storing the row, so the list answered 500 from then on)."""
    for fields in OUT_OF_RANGE_TIMES:
        body = await gateway.error("POST", "/reminders", 400, "invalid_remind_at", json={"title": "x", **fields})
        assert "1970 to 9998" in body["error"], body
    assert (await gateway.call("GET", "/reminders"))["total"] == 0
    reminder = await gateway.create()
    for fields in OUT_OF_RANGE_TIMES:
        await gateway.error("PUT", f"/reminders/{reminder['id']}", 400, "invalid_remind_at", json=fields)
    assert (await gateway.reminder(reminder["id"]))["remind_at"] == reminder["remind_at"]
    # The edges of the range are taken.
    await gateway.create(remind_at="1970-01-01T00:00:00Z")
    await gateway.create(remind_at="9998-12-31T23:59:59Z")

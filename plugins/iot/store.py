"""PostgreSQL: the devices with their last known state, and the operation history. A state
change is one transaction that locks the device's row, so two writers (an operation and the
simulation's tick, or an MQTT state message) never compute a change from the same old state."""
from __future__ import annotations

import uuid
from typing import Any, Iterable

import aiopg
from psycopg2.extras import Json

from gateway.database import execute, fetch_all, fetch_one, fetch_value, transaction

from .model import Device, timestamp

COLUMNS = ("owner, device_id, adapter, type, names, room, room_names, properties, state, online, source, "
           "sort_key, updated_at")


def device_of(row: dict) -> Device:
    return Device(owner=row["owner"], id=row["device_id"], adapter=row["adapter"], type=row["type"],
                  names=row["names"], room=row["room"], room_names=row["room_names"], properties=row["properties"],
                  state=row["state"], online=row["online"], source=row["source"], sort_key=row["sort_key"],
                  updated_at=row["updated_at"])


def operation_of(row: dict) -> dict:
    return {"id": row["id"], "device_id": row["device_id"], "user_id": row["owner"], "action": row["action"],
            "changes": row["changes"], "source": row["source"], "actor": row["actor"], "success": row["success"],
            "error": row["error"], "created_at": timestamp(row["created_at"])}


class DeviceStore:
    def __init__(self, db: aiopg.Pool) -> None:
        self.db = db

    async def insert_missing(self, devices: Iterable[Device]) -> None:
        """Add the devices an owner does not have yet (a simulated home on first use)."""
        async with transaction(self.db) as cursor:
            for device in devices:
                await cursor.execute(
                    "INSERT INTO iot_devices (owner, device_id, adapter, type, names, room, room_names, properties, "
                    "state, online, source, sort_key) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (owner, device_id) DO NOTHING",
                    (device.owner, device.id, device.adapter, device.type, Json(device.names), device.room,
                     Json(device.room_names), Json(device.properties), Json(device.state), device.online,
                     Json(device.source), device.sort_key))

    async def upsert_description(self, device: Device, keep_online: bool = False) -> Device:
        """A device (re)announced by its adapter: its description replaced, the state it had kept
        for the properties it still has; `keep_online`: its online flag too (a new one takes
        `device.online`)."""
        row = await fetch_one(
            self.db,
            "INSERT INTO iot_devices AS d (owner, device_id, adapter, type, names, room, room_names, properties, "
            "state, online, source, sort_key) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (owner, device_id) DO UPDATE SET adapter = EXCLUDED.adapter, type = EXCLUDED.type, "
            "names = EXCLUDED.names, room = EXCLUDED.room, room_names = EXCLUDED.room_names, "
            "properties = EXCLUDED.properties, source = EXCLUDED.source, "
            "online = CASE WHEN %s THEN d.online ELSE EXCLUDED.online END, "
            "state = EXCLUDED.state || (SELECT coalesce(jsonb_object_agg(key, value), '{}'::jsonb) "
            "FROM jsonb_each(d.state) WHERE EXCLUDED.properties ? key), updated_at = now() "
            f"RETURNING {COLUMNS}",
            (device.owner, device.id, device.adapter, device.type, Json(device.names), device.room,
             Json(device.room_names), Json(device.properties), Json(device.state), device.online,
             Json(device.source), device.sort_key, keep_online))
        assert row is not None
        return device_of(row)

    async def remove(self, owner: str, device_id: str) -> bool:
        return await execute(self.db, "DELETE FROM iot_devices WHERE owner = %s AND device_id = %s",
                             (owner, device_id)) > 0

    async def set_online(self, adapter: str, online: bool, owner: str | None = None,
                         device_id: str | None = None) -> list[Device]:
        """Mark an adapter's devices (or one of them) online or offline; the devices that changed."""
        sql = ("UPDATE iot_devices SET online = %s, updated_at = now() WHERE adapter = %s AND online <> %s")
        params: list[Any] = [online, adapter, online]
        if owner is not None:
            sql += " AND owner = %s"
            params.append(owner)
        if device_id is not None:
            sql += " AND device_id = %s"
            params.append(device_id)
        rows = await fetch_all(self.db, sql + f" RETURNING {COLUMNS}", params)
        return [device_of(row) for row in rows]

    async def list_devices(self, owner: str, adapters: list[str], room: str | None = None,
                   kind: str | None = None) -> list[Device]:
        sql = f"SELECT {COLUMNS} FROM iot_devices WHERE owner = %s AND adapter = ANY(%s)"
        params: list[Any] = [owner, adapters]
        if room:
            sql += " AND room = %s"
            params.append(room)
        if kind:
            sql += " AND type = %s"
            params.append(kind)
        rows = await fetch_all(self.db, sql + " ORDER BY sort_key, room, device_id", params)
        return [device_of(row) for row in rows]

    async def get(self, owner: str, device_id: str, adapters: list[str]) -> Device | None:
        row = await fetch_one(self.db, f"SELECT {COLUMNS} FROM iot_devices WHERE owner = %s AND device_id = %s "
                                       "AND adapter = ANY(%s)", (owner, device_id, adapters))
        return device_of(row) if row else None

    async def of_adapter(self, adapter: str, device_ids: list[str] | None = None) -> list[Device]:
        sql = f"SELECT {COLUMNS} FROM iot_devices WHERE adapter = %s"
        params: list[Any] = [adapter]
        if device_ids is not None:
            sql += " AND device_id = ANY(%s)"
            params.append(device_ids)
        return [device_of(row) for row in await fetch_all(self.db, sql + " ORDER BY owner", params)]

    async def locked(self, cursor: aiopg.Cursor, owner: str, device_id: str) -> Device | None:
        """The device's row, locked until the transaction of `cursor` ends."""
        await cursor.execute(f"SELECT {COLUMNS} FROM iot_devices WHERE owner = %s AND device_id = %s FOR UPDATE",
                             (owner, device_id))
        row = await cursor.fetchone()
        return device_of(dict(row)) if row else None

    @staticmethod
    async def write_state(cursor: aiopg.Cursor, device: Device, values: dict[str, Any]) -> Device:
        await cursor.execute(f"UPDATE iot_devices SET state = state || %s, updated_at = now() "
                             f"WHERE owner = %s AND device_id = %s RETURNING {COLUMNS}",
                             (Json(values), device.owner, device.id))
        return device_of(dict(await cursor.fetchone()))

    @staticmethod
    async def record(cursor: aiopg.Cursor, owner: str, device_id: str, action: str, changes: dict,
                     source: str, actor: str, success: bool, error: str | None) -> dict:
        await cursor.execute(
            "INSERT INTO iot_operations (id, owner, device_id, action, changes, source, actor, success, error) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING *",
            (uuid.uuid4().hex, owner, device_id, action, Json(changes), source, actor, success, error))
        return operation_of(dict(await cursor.fetchone()))

    async def history(self, owner: str, device_id: str, limit: int, offset: int) -> tuple[list[dict], int]:
        rows = await fetch_all(self.db, "SELECT * FROM iot_operations WHERE owner = %s AND device_id = %s "
                                        "ORDER BY seq DESC LIMIT %s OFFSET %s", (owner, device_id, limit, offset))
        total = await fetch_value(self.db, "SELECT count(*) FROM iot_operations WHERE owner = %s AND device_id = %s",
                                  (owner, device_id))
        return [operation_of(row) for row in rows], int(total or 0)

    async def homes(self) -> list[str]:
        rows = await fetch_all(self.db, "SELECT DISTINCT owner FROM iot_devices WHERE adapter = 'simulation'")
        return [row["owner"] for row in rows]

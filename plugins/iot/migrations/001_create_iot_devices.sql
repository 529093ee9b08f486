-- The IoT service's devices (docs/iot.md): each person's simulated home and the real devices
-- the MQTT adapter discovered, with their last known state.
CREATE TABLE iot_devices (
    owner       text NOT NULL,
    device_id   text NOT NULL,
    adapter     text NOT NULL,
    type        text NOT NULL,
    names       jsonb NOT NULL,
    room        text NOT NULL,
    room_names  jsonb NOT NULL,
    properties  jsonb NOT NULL,
    state       jsonb NOT NULL,
    online      boolean NOT NULL DEFAULT true,
    -- The adapter's own description of the device (an MQTT discovery config), to rebuild it at start.
    source      jsonb NOT NULL DEFAULT '{}'::jsonb,
    sort_key    integer NOT NULL DEFAULT 1000,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, device_id)
);
CREATE INDEX iot_devices_by_adapter ON iot_devices (adapter, owner);

-- Every operation asked of a device, successful or refused; newest first per device.
CREATE TABLE iot_operations (
    seq         bigserial PRIMARY KEY,
    id          text NOT NULL UNIQUE,
    owner       text NOT NULL,
    device_id   text NOT NULL,
    action      text NOT NULL,
    changes     jsonb NOT NULL,
    source      text NOT NULL,
    actor       text NOT NULL,
    success     boolean NOT NULL,
    error       text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX iot_operations_by_device ON iot_operations (owner, device_id, seq DESC);

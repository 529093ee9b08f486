-- The device a turn's message came from (client_id, device_name, user_agent), for the echo to the
-- person's other devices (`client_info`), whichever instance runs the turn; NULL: handed in
-- without a device (a webhook, an automation).
ALTER TABLE chat_turn_queue ADD COLUMN client_info jsonb;

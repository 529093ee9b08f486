-- What a turn's user message is stored with when the plugin that handed the turn in chose it
-- (webhooks record their platform); NULL: the mode, as for a device's message.
ALTER TABLE chat_turn_queue ADD COLUMN metadata jsonb;

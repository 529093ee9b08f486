-- A turn's id is chosen by the gateway, not by the database, so an idle session's turn can start
-- (and its frames carry the id) before its row is written: see plugins/chat/turns.py.
ALTER TABLE chat_turn_queue ADD COLUMN turn_id text;
UPDATE chat_turn_queue SET turn_id = id::text;
ALTER TABLE chat_turn_queue ALTER COLUMN turn_id SET NOT NULL;
CREATE UNIQUE INDEX chat_turn_queue_turn_id ON chat_turn_queue (turn_id);
-- Rows written by an instance still running the previous version get an id too.
ALTER TABLE chat_turn_queue ALTER COLUMN turn_id SET DEFAULT md5(random()::text || clock_timestamp()::text);

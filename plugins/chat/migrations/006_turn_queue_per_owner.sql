-- Session ids are per owner (plugins/sessions, 002): a session is named by (user_id, session_id)
-- in the queue too, and a client_msg_id is unique within that pair.
DROP INDEX chat_turn_queue_client_msg;
CREATE UNIQUE INDEX chat_turn_queue_client_msg ON chat_turn_queue (user_id, session_id, client_msg_id)
    WHERE client_msg_id IS NOT NULL;
DROP INDEX chat_turn_queue_waiting;
CREATE INDEX chat_turn_queue_waiting ON chat_turn_queue (user_id, session_id, id) WHERE status = 'queued';

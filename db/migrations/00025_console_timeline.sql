-- +goose Up
-- The console's thread page shows which outbound messages waited for the
-- thread's lock: those with a thread.message_queued event. This index
-- finds a message's event by the execution and the message id in one
-- probe; without it each message of the page read every event of its
-- execution, which grows with the length of the conversation. Queued
-- messages are the exception, so the index is small.
CREATE INDEX execution_event_queued_message_idx ON execution_event (execution_id, (payload ->> 'message_id'))
    WHERE action = 'thread.message_queued';

-- +goose Down
DROP INDEX execution_event_queued_message_idx;

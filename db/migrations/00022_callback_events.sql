-- +goose Up
-- callback_events: which callbacks an execution's callback_url receives
-- (execution_options.callback_events: result, input_request, status,
-- error); NULL means the default, result and input_request.
ALTER TABLE agent_execution ADD COLUMN callback_events text[];

-- +goose Down
ALTER TABLE agent_execution DROP COLUMN callback_events;

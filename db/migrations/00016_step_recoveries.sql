-- +goose Up
-- step_recoveries counts how often the step reaper (engine/reap_steps.go)
-- found the execution running with no live execution.step job and enqueued
-- its step again; once it reaches the engine's MaxStepRecoveries the reaper
-- fails the execution instead.
ALTER TABLE agent_execution ADD COLUMN step_recoveries integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE agent_execution DROP COLUMN step_recoveries;

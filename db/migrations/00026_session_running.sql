-- +goose Up
-- Lane admission passes over pending runs whose session has a run running
-- (LaneFairCandidates): one probe per candidate into the first index, which
-- holds only the running runs of sessions. Each tenant's heads are read in
-- admission order from the second, so passing over such runs reads that
-- tenant's pending runs only, not the lane's.
CREATE INDEX agent_execution_session_running_idx ON agent_execution (tenant_id, session_key)
    WHERE status = 'running' AND session_key IS NOT NULL;
CREATE INDEX agent_execution_lane_tenant_pending_idx ON agent_execution (lane, tenant_id, admit_first DESC, queued_at, id)
    WHERE status = 'pending';

-- +goose Down
DROP INDEX agent_execution_lane_tenant_pending_idx;
DROP INDEX agent_execution_session_running_idx;

import type { SqlDialect } from "../../store/dialect.js";

/**
 * What run-level operations (cancel, resume, fork, delete) do to the agent tables, as SQL shared by
 * both backends (`$n` placeholders; the SQLite store rewrites them). The store runs them, through
 * the extension contract, in the same transaction as its own statements for the operation.
 * Parameters are listed per statement.
 */

const TREE = `WITH RECURSIVE tree(id) AS (
    SELECT CAST($1 AS TEXT) UNION ALL SELECT r.id FROM cairn_runs r JOIN tree t ON r.parent_id = t.id)
  SELECT id FROM tree`;

/** $1 run id: its pending approvals (and its descendants') are withdrawn with it. */
export const CANCEL_APPROVALS = `UPDATE cairn_approvals SET status = 'cancelled'
  WHERE status = 'pending' AND run_id IN (${TREE})`;

/** $1 run id: a resumed run's withdrawn approvals are pending again. */
export const REOPEN_APPROVALS = `UPDATE cairn_approvals SET status = 'pending'
  WHERE status = 'cancelled' AND run_id IN (${TREE})`;

/** $1 fork id, $2 original run id, $3 fromSeq: the fork keeps the provenance of the journal it reuses. */
export const FORK_MODEL_CALLS = `INSERT INTO cairn_model_calls (run_id, seq, provider, model_id, prompt_hash, prompt_messages,
    finish_reason, text_excerpt, tool_call_ids, input_tokens, output_tokens, total_tokens, cost_usd, latency_ms, streamed, created_at)
  SELECT $1, seq, provider, model_id, prompt_hash, prompt_messages, finish_reason, text_excerpt, tool_call_ids, input_tokens,
    output_tokens, total_tokens, cost_usd, latency_ms, streamed, created_at
  FROM cairn_model_calls WHERE run_id = $2 AND seq < $3`;

export const FORK_TOOL_CALLS = `INSERT INTO cairn_tool_calls (run_id, seq, tool_call_id, tool_name, model_seq, input, output_excerpt,
    status, permission, decided_by, child_run_id, created_at)
  SELECT $1, seq, tool_call_id, tool_name, model_seq, input, output_excerpt, status, permission, decided_by, child_run_id, created_at
  FROM cairn_tool_calls WHERE run_id = $2 AND seq < $3`;

/**
 * The payload hashes inside each model call's `prompt_messages` (a JSON array, or
 * `{"after": seq, "add": [...]}`), as `run_id, h`: retention keeps a prompt's payloads while a model
 * call names them.
 */
export function promptHashes(dialect: SqlDialect): string {
  return dialect.name === "sqlite"
    ? `SELECT m.run_id AS run_id, j.value AS h FROM cairn_model_calls m,
    json_each(m.prompt_messages, CASE WHEN json_type(m.prompt_messages) = 'array' THEN '$' ELSE '$.add' END) j`
    : `SELECT m.run_id AS run_id, jsonb_array_elements_text(CASE WHEN jsonb_typeof(m.prompt_messages::jsonb) = 'array'
    THEN m.prompt_messages::jsonb ELSE m.prompt_messages::jsonb -> 'add' END) AS h FROM cairn_model_calls m`;
}

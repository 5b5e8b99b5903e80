import type { LayerMigration } from "../../store/extension.js";

/**
 * The agents layer's schema: its own numbered list under the name "agents". Version 1 was version
 * 2 of the single list every layer shared before layers owned their schemas (`legacyVersion`), and
 * version 2 holds the agent tables' part of that list's version 5 ("retention"), so a database
 * written then is recorded as having both and is given neither again. Never edit a migration that
 * has shipped; add one.
 */
export const AGENT_MIGRATIONS: readonly LayerMigration[] = [
  {
    version: 1,
    legacyVersion: 2,
    name: "agents",
    statements: [
      // One row per model call: what was asked (by hash: the prompt's messages are content-addressed
      // payloads), what came back, and what it cost. The full response is the step's output.
      `CREATE TABLE cairn_model_calls (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        provider TEXT NOT NULL,
        model_id TEXT NOT NULL,
        prompt_hash TEXT NOT NULL,
        prompt_messages TEXT NOT NULL,
        finish_reason TEXT,
        text_excerpt TEXT,
        tool_call_ids TEXT,
        input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        total_tokens BIGINT NOT NULL,
        cost_usd DOUBLE PRECISION NOT NULL,
        latency_ms BIGINT NOT NULL,
        streamed INTEGER NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (run_id, seq)
      )`,
      // One row per tool call; model_seq links it to the model call that requested it.
      `CREATE TABLE cairn_tool_calls (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        tool_call_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        model_seq INTEGER,
        input TEXT,
        output_excerpt TEXT,
        status TEXT NOT NULL,
        permission TEXT NOT NULL,
        decided_by TEXT,
        child_run_id TEXT,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (run_id, seq)
      )`,
      `CREATE INDEX cairn_tool_calls_id ON cairn_tool_calls (run_id, tool_call_id)`,
      // A request is keyed by the seq of the step that made it; tool_call_id is what people quote
      // (a provider's tool call id, or budget:<seq>).
      `CREATE TABLE cairn_approvals (
        run_id TEXT NOT NULL,
        request_seq INTEGER NOT NULL,
        tool_call_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        input TEXT,
        status TEXT NOT NULL,
        requested_at BIGINT NOT NULL,
        decided_at BIGINT,
        decided_by TEXT,
        reason TEXT,
        PRIMARY KEY (run_id, request_seq)
      )`,
      `CREATE INDEX cairn_approvals_pending ON cairn_approvals (status, requested_at)`,
      // A budget scope per agent run; a sub-agent's scope is carved out of its parent's, and every
      // charge is applied to the whole chain of scopes.
      `CREATE TABLE cairn_budgets (
        run_id TEXT PRIMARY KEY,
        parent_run_id TEXT,
        tokens_limit BIGINT,
        usd_limit DOUBLE PRECISION,
        model_calls_limit INTEGER,
        wall_time_ms_limit BIGINT,
        tokens_spent BIGINT NOT NULL DEFAULT 0,
        usd_spent DOUBLE PRECISION NOT NULL DEFAULT 0,
        model_calls_spent INTEGER NOT NULL DEFAULT 0,
        started_at BIGINT NOT NULL
      )`,
      `CREATE TABLE cairn_memory (
        agent TEXT NOT NULL,
        key TEXT NOT NULL,
        version INTEGER NOT NULL,
        value TEXT,
        value_hash TEXT,
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (agent, key, version)
      )`,
      `CREATE TABLE cairn_artifacts (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        media_type TEXT NOT NULL,
        hash TEXT NOT NULL,
        size INTEGER NOT NULL,
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        created_at BIGINT NOT NULL
      )`,
      // Streamed model output for readers in other processes (cairn.stream): text deltas as they
      // arrive, rewritten from the record when the call's checkpoint commits, then a "finish" row.
      `CREATE TABLE cairn_stream_chunks (
        run_id TEXT NOT NULL,
        model_seq INTEGER NOT NULL,
        position INTEGER NOT NULL,
        kind TEXT NOT NULL,
        chunk TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (run_id, model_seq, position)
      )`,
      `CREATE VIEW cairn_trajectory AS
        SELECT run_id, seq, 'model' AS kind, model_id AS name, text_excerpt AS detail, total_tokens AS tokens,
               cost_usd, created_at
        FROM cairn_model_calls
        UNION ALL
        SELECT run_id, seq, 'tool' AS kind, tool_name AS name, output_excerpt AS detail, 0 AS tokens, 0 AS cost_usd, created_at
        FROM cairn_tool_calls`,
      `CREATE VIEW cairn_costs AS
        SELECT r.id AS run_id, r.workflow, r.root_id, r.parent_id,
               count(m.seq) AS model_calls, COALESCE(sum(m.input_tokens), 0) AS input_tokens,
               COALESCE(sum(m.output_tokens), 0) AS output_tokens, COALESCE(sum(m.total_tokens), 0) AS total_tokens,
               COALESCE(sum(m.cost_usd), 0) AS cost_usd
        FROM cairn_runs r LEFT JOIN cairn_model_calls m ON m.run_id = r.id
        GROUP BY r.id, r.workflow, r.root_id, r.parent_id`,
      `CREATE VIEW cairn_provenance AS
        SELECT t.run_id, t.seq AS tool_seq, t.tool_call_id, t.tool_name, t.input AS tool_input, t.status AS tool_status,
               t.decided_by, m.seq AS model_seq, m.model_id, m.text_excerpt AS model_excerpt, m.total_tokens,
               m.prompt_hash, r.workflow, r.parent_id, r.root_id
        FROM cairn_tool_calls t
        JOIN cairn_runs r ON r.id = t.run_id
        LEFT JOIN cairn_model_calls m ON m.run_id = t.run_id AND m.seq = t.model_seq`,
    ],
  },
  {
    version: 2,
    legacyVersion: 5,
    name: "retention",
    // Payload garbage collection asks "does any row still name this hash?"; these answer it for
    // memory and artifacts without a scan (see src/store/retention.ts).
    statements: [
      `CREATE INDEX cairn_memory_value_hash ON cairn_memory (value_hash) WHERE value_hash IS NOT NULL`,
      `CREATE INDEX cairn_artifacts_hash ON cairn_artifacts (hash)`,
      `CREATE INDEX cairn_artifacts_run ON cairn_artifacts (run_id)`,
    ],
  },
];

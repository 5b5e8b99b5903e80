/**
 * The schema, as numbered migrations shared verbatim by both backends: the DDL below is the
 * portable subset of SQLite and PostgreSQL, so the tables and columns are the same by construction.
 * Times are integer milliseconds since the epoch. Never edit a migration that has shipped; add one.
 */
export interface Migration {
  version: number;
  name: string;
  statements: string[];
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "engine",
    statements: [
      `CREATE TABLE cairn_runs (
        id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        status TEXT NOT NULL,
        input TEXT,
        input_hash TEXT,
        output TEXT,
        output_hash TEXT,
        error TEXT,
        parent_id TEXT,
        parent_seq INTEGER,
        root_id TEXT NOT NULL,
        app_version TEXT NOT NULL,
        executor_id TEXT,
        wake_at BIGINT,
        deadline_at BIGINT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        finished_at BIGINT,
        recoveries INTEGER NOT NULL DEFAULT 0,
        forked_from TEXT,
        forked_from_seq INTEGER
      )`,
      `CREATE INDEX cairn_runs_claim ON cairn_runs (status, app_version, wake_at)`,
      `CREATE INDEX cairn_runs_parent ON cairn_runs (parent_id)`,
      `CREATE INDEX cairn_runs_executor ON cairn_runs (executor_id)`,
      `CREATE INDEX cairn_runs_workflow ON cairn_runs (workflow, created_at)`,
      `CREATE TABLE cairn_steps (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        status TEXT NOT NULL,
        output TEXT,
        output_hash TEXT,
        error TEXT,
        started_at BIGINT NOT NULL,
        finished_at BIGINT,
        attempts INTEGER NOT NULL,
        PRIMARY KEY (run_id, seq)
      )`,
      `CREATE TABLE cairn_payloads (
        hash TEXT PRIMARY KEY,
        body TEXT NOT NULL,
        size INTEGER NOT NULL,
        created_at BIGINT NOT NULL
      )`,
      `CREATE TABLE cairn_messages (
        id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        topic TEXT NOT NULL,
        body TEXT,
        body_hash TEXT,
        sender TEXT,
        position BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        consumed_by TEXT,
        consumed_at BIGINT
      )`,
      `CREATE INDEX cairn_messages_inbox ON cairn_messages (run_id, topic, position) WHERE consumed_at IS NULL`,
      `CREATE TABLE cairn_events (
        run_id TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT,
        value_hash TEXT,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (run_id, key)
      )`,
      `CREATE TABLE cairn_executors (
        id TEXT PRIMARY KEY,
        hostname TEXT NOT NULL,
        pid INTEGER NOT NULL,
        backend_pid INTEGER,
        app_version TEXT NOT NULL,
        started_at BIGINT NOT NULL,
        heartbeat_at BIGINT NOT NULL
      )`,
      // The journal as people read it: payloads resolved, durations computed.
      `CREATE VIEW cairn_journal AS
        SELECT s.run_id, s.seq, s.name, s.kind, s.status,
               COALESCE(s.output, p.body) AS output, s.error,
               s.started_at, s.finished_at, s.finished_at - s.started_at AS duration_ms, s.attempts,
               r.workflow
        FROM cairn_steps s
        JOIN cairn_runs r ON r.id = s.run_id
        LEFT JOIN cairn_payloads p ON p.hash = s.output_hash`,
    ],
  },
  {
    version: 2,
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
    version: 3,
    name: "replay order",
    statements: [
      // Where each operation was called (its scope and occurrence; null for a top-level first
      // occurrence), the order in which the workflow saw operations complete, and a fingerprint of
      // what it was called with: what replay needs to reproduce concurrent and nested operations
      // exactly (docs/replay.md).
      `ALTER TABLE cairn_steps ADD COLUMN path TEXT`,
      `ALTER TABLE cairn_steps ADD COLUMN completion INTEGER`,
      `ALTER TABLE cairn_steps ADD COLUMN fingerprint TEXT`,
    ],
  },
  {
    version: 4,
    name: "executor-namespace-and-recovery-base",
    statements: [
      // Where `pid` means something: "<boot id>:<pid namespace>" on Linux, null elsewhere. A pid is
      // only checked for life by an executor in the same namespace on the same boot of the machine.
      `ALTER TABLE cairn_executors ADD COLUMN pid_namespace TEXT`,
      // The run's `recoveries` when it was last resumed: recoveries past it count toward
      // maxRecoveryAttempts (poison runs), so a resumed run gets a fresh allowance.
      `ALTER TABLE cairn_runs ADD COLUMN recovery_base INTEGER NOT NULL DEFAULT 0`,
    ],
  },
  {
    version: 5,
    name: "retention",
    // Payload garbage collection asks "does any row still name this hash?" for a few hashes at a
    // time; these partial indexes answer it without scanning the tables (rows with inline values,
    // the common case, are not indexed at all).
    statements: [
      `CREATE INDEX cairn_runs_input_hash ON cairn_runs (input_hash) WHERE input_hash IS NOT NULL`,
      `CREATE INDEX cairn_runs_output_hash ON cairn_runs (output_hash) WHERE output_hash IS NOT NULL`,
      `CREATE INDEX cairn_steps_output_hash ON cairn_steps (output_hash) WHERE output_hash IS NOT NULL`,
      `CREATE INDEX cairn_messages_body_hash ON cairn_messages (body_hash) WHERE body_hash IS NOT NULL`,
      `CREATE INDEX cairn_events_value_hash ON cairn_events (value_hash) WHERE value_hash IS NOT NULL`,
      `CREATE INDEX cairn_memory_value_hash ON cairn_memory (value_hash) WHERE value_hash IS NOT NULL`,
      `CREATE INDEX cairn_artifacts_hash ON cairn_artifacts (hash)`,
      `CREATE INDEX cairn_runs_retention ON cairn_runs (finished_at) WHERE finished_at IS NOT NULL AND parent_id IS NULL`,
      `CREATE INDEX cairn_messages_run ON cairn_messages (run_id)`,
      `CREATE INDEX cairn_artifacts_run ON cairn_artifacts (run_id)`,
    ],
  },
];

export const LATEST_SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

export const MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS cairn_migrations (
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at BIGINT NOT NULL
)`;

/** Inline values up to this many characters; longer ones go to cairn_payloads by hash (owned by the value module). */
export { INLINE_LIMIT } from "./value/journal-value.js";

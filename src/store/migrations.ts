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
];

export const LATEST_SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

export const MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS cairn_migrations (
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at BIGINT NOT NULL
)`;

/** Inline values up to this many characters; longer ones go to cairn_payloads by hash. */
export const INLINE_LIMIT = 256;

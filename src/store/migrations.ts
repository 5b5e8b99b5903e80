import type { LayerMigration } from "./extension.js";

/**
 * The engine's schema (the store's own layer, "core"), as numbered migrations shared verbatim by
 * both backends: the DDL below is the portable subset of SQLite and PostgreSQL, so the tables and
 * columns are the same by construction. Times are integer milliseconds since the epoch. Never edit
 * a migration that has shipped; add one. The layers above bring their own lists through the
 * extension contract (`extension.ts`); `migration-runner.ts` applies them all.
 *
 * A migration runs while the previous version's executors still run (a rolling upgrade), so it
 * only adds: tables, indexes, and columns those executors' inserts may leave out (nullable, or
 * with a default); it drops, renames, retypes and constrains nothing, and Cairn's statements read
 * columns by name, never `*` (statements.ts). test/store/rolling-upgrade.test.ts holds every
 * layer's migrations to this.
 *
 * Until layers had their own lists, one list numbered 1-5 held every migration (2 was the agents'
 * tables); `legacyVersion` maps each core migration onto it, so such a database is not migrated twice.
 */
export const CORE_MIGRATIONS: readonly LayerMigration[] = [
  {
    version: 1,
    legacyVersion: 1,
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
    legacyVersion: 3,
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
    version: 3,
    legacyVersion: 4,
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
    version: 4,
    legacyVersion: 5,
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
      `CREATE INDEX cairn_runs_retention ON cairn_runs (finished_at) WHERE finished_at IS NOT NULL AND parent_id IS NULL`,
      `CREATE INDEX cairn_messages_run ON cairn_messages (run_id)`,
    ],
  },
  {
    version: 5,
    name: "executor-capacity",
    // The Worker table of the scheduler (src/scheduler/): how many runs an executor may hold at
    // once. Null for executors of an older Cairn: they take no queued runs (they never declared any).
    statements: [`ALTER TABLE cairn_executors ADD COLUMN capacity INTEGER`],
  },
  {
    version: 6,
    name: "executor-wake-channel",
    // The channel the executor's session hears wake-ups meant for it alone (PostgreSQL:
    // `cairn_wake_<backend pid>`) and the workflows it runs (a JSON array of names), so that a start
    // wakes one executor that can run it instead of every one. Null on SQLite and for executors of
    // an older Cairn: no write ever picks them to wake alone.
    // And on a waiting run, the channel of the executor that parked it (holding it warm): what
    // wakes the run wakes that executor alone.
    statements: [
      `ALTER TABLE cairn_executors ADD COLUMN wake_channel TEXT`,
      `ALTER TABLE cairn_executors ADD COLUMN workflows TEXT`,
      `ALTER TABLE cairn_runs ADD COLUMN wake_channel TEXT`,
    ],
  },
  {
    version: 7,
    name: "runs-held-by-a-layer",
    // The layer whose dispatch starts an enqueued run (the scheduler's queues: NewRun.heldBy). The
    // core claim looks for claimable enqueued runs through `cairn_runs_fresh`, which leaves held
    // runs out: with 30,000 runs queued, every look and claim walked all of them (20 ms a look),
    // since whether a layer holds a run was only known from the layer's table (`holdsRuns`). A run
    // enqueued without the mark (from plain SQL) is still held by `holdsRuns`, looked at each time.
    // The mark stays on the row after the run leaves `enqueued` ("was queued"); it means something
    // only while the run is enqueued. A resume clears it (the layer marks the run again if it holds it).
    statements: [
      `ALTER TABLE cairn_runs ADD COLUMN held_by TEXT`,
      `CREATE INDEX cairn_runs_fresh ON cairn_runs (app_version, created_at) WHERE status = 'enqueued' AND held_by IS NULL`,
    ],
  },
];

/**
 * The ledger of applied migrations, one row per layer and version. Created by the first Cairn
 * with layers; older databases are carried over from `cairn_migrations` (see migration-runner.ts).
 */
export const LEDGER_TABLE = `CREATE TABLE IF NOT EXISTS cairn_layer_migrations (
  layer TEXT NOT NULL,
  version INTEGER NOT NULL,
  name TEXT NOT NULL,
  applied_at BIGINT NOT NULL,
  PRIMARY KEY (layer, version)
)`;

/**
 * The single list that numbered every migration before layers (1-5). It is kept, and it records
 * one more version, {@link LAYERED_SCHEMA_VERSION}, so that a Cairn from before layers refuses the
 * database ("newer than this Cairn knows") instead of writing to a schema it cannot see.
 */
export const LEGACY_MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS cairn_migrations (
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at BIGINT NOT NULL
)`;

export const LAYERED_SCHEMA_VERSION = 6;

/** Inline values up to this many characters; longer ones go to cairn_payloads by hash (owned by the value module). */
export { INLINE_LIMIT } from "./value/journal-value.js";

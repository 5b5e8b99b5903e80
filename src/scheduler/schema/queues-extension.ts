import type { StoreExtension } from "../../store/extension.js";

/**
 * What a queued run's `cairn_runs.held_by` says (NewRun.heldBy): the queues start it, the core
 * claim leaves it alone without looking at `cairn_queue_runs` (`holdsRuns` still covers a run
 * enqueued from plain SQL without it).
 */
export const HELD_BY_QUEUES = "queues";

/**
 * The `held_by` of a run an enqueue is inserting ($1 its id): the queues', unless a Task row of that
 * id is there already — left by a run deleted by hand, not by retention — which the enqueue's own
 * Task row then does not replace (`ON CONFLICT DO NOTHING`): a run marked held with no waiting
 * Task row would wait for good, where unmarked the core claim runs it, as before the mark.
 */
export const HELD_UNLESS_STALE_ROW = `CASE WHEN EXISTS (SELECT 1 FROM cairn_queue_runs WHERE run_id = $1) THEN NULL ELSE '${HELD_BY_QUEUES}' END`;

/** A run (a `cairn_runs` row, unaliased) waits in a queue: its Task row is not dispatched yet. */
const WAITING_IN_A_QUEUE = `EXISTS (SELECT 1 FROM cairn_queue_runs q WHERE q.run_id = cairn_runs.id AND q.dispatched_at IS NULL)`;

/**
 * The scheduler's queues as the store sees them (the DBOS paper's Task and Worker tables):
 *
 * - `cairn_queues`: each queue declared in code (`cairn.queue`), with its limits and its dispatch
 *   policy, kept in the database so every executor and every SQL reader sees the same.
 * - `cairn_queue_runs`: the Task table, one row per run enqueued on a queue — its partition key,
 *   priority, dedup key and earliest start — and, once dispatched, the decision itself: which
 *   executor took it, when, under which policy.
 * - `cairn_executor_queues` / `cairn_executor_partitions`: what each executor (a `cairn_executors`
 *   row, which carries its capacity) serves; the view `cairn_workers` adds what is in use and free. Rows of executors that are gone are ignored (every
 *   reader joins `cairn_executors`) and swept by the dispatcher.
 *
 * A queued run is a `cairn_runs` row with status `enqueued` and a Task row not yet dispatched; the
 * core claim leaves such runs alone (`holdsRuns`), and a dispatch makes them `running` under the
 * executor the policy chose. From then on the run lives as any other: leases, fencing, takeover.
 */
export const QUEUES_EXTENSION: StoreExtension = {
  name: "queues",
  migrations: [
    {
      version: 1,
      name: "queues",
      statements: [
        `CREATE TABLE cairn_queues (
          name TEXT PRIMARY KEY,
          concurrency INTEGER,
          worker_concurrency INTEGER,
          partition_concurrency INTEGER,
          rate_limit INTEGER,
          rate_period_ms BIGINT,
          priority INTEGER NOT NULL DEFAULT 0,
          policy TEXT NOT NULL,
          policy_sql TEXT NOT NULL,
          locality_wait_ms BIGINT NOT NULL DEFAULT 0,
          updated_at BIGINT NOT NULL
        )`,
        `CREATE TABLE cairn_queue_runs (
          run_id TEXT PRIMARY KEY,
          queue TEXT NOT NULL,
          partition_key TEXT,
          priority INTEGER NOT NULL DEFAULT 0,
          dedup_key TEXT,
          not_before BIGINT,
          enqueued_at BIGINT NOT NULL,
          dispatched_at BIGINT,
          executor_id TEXT,
          policy TEXT
        )`,
        // The runs waiting for a dispatch, in the order policies read them.
        `CREATE INDEX cairn_queue_runs_waiting ON cairn_queue_runs (queue, priority, enqueued_at) WHERE dispatched_at IS NULL`,
        // The first waiting run of each partition key (fair sharing), and the keys themselves.
        `CREATE INDEX cairn_queue_runs_partition_waiting ON cairn_queue_runs (queue, partition_key, priority, enqueued_at) WHERE dispatched_at IS NULL`,
        // The rate limit counts a queue's recent dispatches.
        `CREATE INDEX cairn_queue_runs_dispatched ON cairn_queue_runs (queue, dispatched_at) WHERE dispatched_at IS NOT NULL`,
        // One run per live dedup key: a key whose run finished is cleared by the next enqueue with it.
        `CREATE UNIQUE INDEX cairn_queue_runs_dedup ON cairn_queue_runs (queue, dedup_key)`,
        `CREATE TABLE cairn_executor_queues (
          executor_id TEXT NOT NULL,
          queue TEXT NOT NULL,
          PRIMARY KEY (executor_id, queue)
        )`,
        // The Worker table as the paper has it: each executor with its capacity, what is in use
        // (its running runs, counted, so it is never stale) and what is free.
        `CREATE VIEW cairn_workers AS
          SELECT e.id, e.hostname, e.pid, e.app_version, e.capacity,
            (SELECT COUNT(*) FROM cairn_runs r WHERE r.executor_id = e.id AND r.status = 'running') AS in_use,
            e.capacity - (SELECT COUNT(*) FROM cairn_runs r WHERE r.executor_id = e.id AND r.status = 'running') AS free,
            e.started_at, e.heartbeat_at
          FROM cairn_executors e`,
        `CREATE TABLE cairn_executor_partitions (
          executor_id TEXT NOT NULL,
          partition_key TEXT NOT NULL,
          PRIMARY KEY (executor_id, partition_key)
        )`,
      ],
    },
    {
      version: 2,
      name: "delayed starts by time",
      statements: [
        // A queue's next delayed start, read at every dispatch pass (for the wake-up timer): found
        // at the front of this index instead of by reading every waiting run of the queue.
        `CREATE INDEX cairn_queue_runs_delayed ON cairn_queue_runs (queue, not_before) WHERE dispatched_at IS NULL AND not_before IS NOT NULL`,
      ],
    },
    {
      version: 3,
      name: "wake channels",
      statements: [
        // Where the executor hears of the runs dispatched to it (PostgreSQL: its session's own
        // NOTIFY channel), so a dispatch wakes that executor and not every one. NULL — SQLite, an
        // executor registered while its session was lost, an older Cairn — means the shared
        // channel, which every executor hears.
        `ALTER TABLE cairn_executor_queues ADD COLUMN wake_channel TEXT`,
      ],
    },
    {
      version: 4,
      name: "queued-runs-held",
      // The runs waiting in a queue, marked as the queues' (core migration 7, `held_by`): the
      // core claim's look stops reading them one by one.
      statements: [`UPDATE cairn_runs SET held_by = '${HELD_BY_QUEUES}' WHERE status = 'enqueued' AND ${WAITING_IN_A_QUEUE}`],
    },
  ],
  tables: ["cairn_queues", "cairn_queue_runs", "cairn_executor_queues", "cairn_executor_partitions"],
  stepKinds: [],
  hooks: {
    holdsRuns: WAITING_IN_A_QUEUE,
    // A queued run cancelled before its dispatch leaves the waiting runs (marked, not dispatched:
    // the rate limit does not count it), so dispatch never reads past it again.
    onCancel: [
      `UPDATE cairn_queue_runs SET dispatched_at = (SELECT updated_at FROM cairn_runs WHERE id = $1), policy = 'cancelled'
       WHERE run_id = $1 AND dispatched_at IS NULL`,
    ],
    // A resumed queued run waits for its queue again, under the queue's limits, held by the queues
    // again (the core's resume let go of it).
    onResume: [
      `UPDATE cairn_queue_runs SET dispatched_at = NULL, executor_id = NULL, policy = NULL
       WHERE run_id = $1 AND EXISTS (SELECT 1 FROM cairn_runs r WHERE r.id = $1 AND r.status = 'enqueued')`,
      `UPDATE cairn_runs SET held_by = '${HELD_BY_QUEUES}' WHERE id = $1 AND status = 'enqueued' AND ${WAITING_IN_A_QUEUE}`,
    ],
    onDelete: { runTables: ["cairn_queue_runs"], payloadColumns: [] },
  },
};

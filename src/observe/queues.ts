import type { ReadStore } from "./read-store.js";

/**
 * The scheduler as people read it (`cairn executors`, `cairn queues`, `cairn runs --queue`): the
 * Worker table (executors with their capacity, load and what they serve) and the queues with their
 * depth, running runs, dispatch rate and oldest waiting run — each one SELECT over the tables.
 */

export interface ExecutorView {
  id: string;
  hostname: string;
  pid: number;
  appVersion: string;
  /** null: an executor of a Cairn before queues (it takes no queued runs). */
  capacity: number | null;
  inUse: number;
  queues: string[];
  partitions: string[];
  startedAt: number;
  heartbeatAt: number;
}

export interface QueueView {
  name: string;
  policy: string;
  concurrency: number | null;
  workerConcurrency: number | null;
  partitionConcurrency: number | null;
  rateLimit: { limit: number; periodMs: number } | null;
  /** Runs waiting for a dispatch (delayed ones included). */
  depth: number;
  running: number;
  /** Dispatches in the last minute. */
  dispatchedLastMinute: number;
  /** When the oldest waiting run was enqueued; null when none waits. */
  oldestWaitingAt: number | null;
}

const EXECUTORS = `SELECT e.id, e.hostname, e.pid, e.app_version, e.capacity, e.started_at, e.heartbeat_at,
  (SELECT COUNT(*) FROM cairn_runs r WHERE r.executor_id = e.id AND r.status = 'running') AS in_use
  FROM cairn_executors e ORDER BY e.started_at, e.id`;

const QUEUES = `SELECT q.name, q.policy, q.concurrency, q.worker_concurrency, q.partition_concurrency, q.rate_limit, q.rate_period_ms,
  (SELECT COUNT(*) FROM cairn_queue_runs t JOIN cairn_runs r ON r.id = t.run_id
    WHERE t.queue = q.name AND t.dispatched_at IS NULL AND r.status = 'enqueued') AS depth,
  (SELECT COUNT(*) FROM cairn_queue_runs t JOIN cairn_runs r ON r.id = t.run_id
    WHERE t.queue = q.name AND t.dispatched_at IS NOT NULL AND r.status IN ('running', 'waiting')) AS running,
  (SELECT COUNT(*) FROM cairn_queue_runs t WHERE t.queue = q.name AND t.dispatched_at > $1) AS dispatched,
  (SELECT MIN(t.enqueued_at) FROM cairn_queue_runs t JOIN cairn_runs r ON r.id = t.run_id
    WHERE t.queue = q.name AND t.dispatched_at IS NULL AND r.status = 'enqueued') AS oldest
  FROM cairn_queues q ORDER BY q.name`;

/** The executors registered now (live, or dead and not yet noticed), oldest first. */
export async function listExecutors(store: ReadStore): Promise<ExecutorView[]> {
  const rows = await store.select<Record<string, unknown>>(EXECUTORS);
  const queues = await orEmpty(store.select<{ executor_id: string; queue: string }>("SELECT executor_id, queue FROM cairn_executor_queues"));
  const partitions = await orEmpty(
    store.select<{ executor_id: string; partition_key: string }>("SELECT executor_id, partition_key FROM cairn_executor_partitions"),
  );
  return rows.map((row) => ({
    id: String(row.id),
    hostname: String(row.hostname),
    pid: Number(row.pid),
    appVersion: String(row.app_version),
    capacity: row.capacity === null || row.capacity === undefined ? null : Number(row.capacity),
    inUse: Number(row.in_use),
    queues: queues.filter((q) => q.executor_id === row.id).map((q) => q.queue),
    partitions: partitions.filter((p) => p.executor_id === row.id).map((p) => p.partition_key),
    startedAt: Number(row.started_at),
    heartbeatAt: Number(row.heartbeat_at),
  }));
}

/** Every queue declared against this database, by name. */
export async function listQueues(store: ReadStore, now = Date.now()): Promise<QueueView[]> {
  const rows = await orEmpty(store.select<Record<string, unknown>>(QUEUES, [now - 60_000]));
  const n = (value: unknown): number | null => (value === null || value === undefined ? null : Number(value));
  return rows.map((row) => ({
    name: String(row.name),
    policy: String(row.policy),
    concurrency: n(row.concurrency),
    workerConcurrency: n(row.worker_concurrency),
    partitionConcurrency: n(row.partition_concurrency),
    rateLimit: row.rate_limit === null ? null : { limit: Number(row.rate_limit), periodMs: Number(row.rate_period_ms) },
    depth: Number(row.depth),
    running: Number(row.running),
    dispatchedLastMinute: Number(row.dispatched),
    oldestWaitingAt: n(row.oldest),
  }));
}

/** Ids of the runs enqueued on `queue`, newest first (`cairn runs --queue`). */
export async function queueRunIds(store: ReadStore, queue: string, options: { status?: string; workflow?: string; limit: number }): Promise<string[]> {
  const rows = await orEmpty(
    store.select<{ id: string }>(
      `SELECT r.id FROM cairn_queue_runs t JOIN cairn_runs r ON r.id = t.run_id
       WHERE t.queue = $1 AND (CAST($2 AS TEXT) IS NULL OR r.status = CAST($2 AS TEXT))
         AND (CAST($3 AS TEXT) IS NULL OR r.workflow = CAST($3 AS TEXT))
       ORDER BY r.created_at DESC, r.id DESC LIMIT $4`,
      [queue, options.status ?? null, options.workflow ?? null, options.limit],
    ),
  );
  return rows.map((r) => String(r.id));
}

/** A database written before queues has none of their tables: it has no queues, not an error. */
async function orEmpty<T>(rows: Promise<T[]>): Promise<T[]> {
  try {
    return await rows;
  } catch (error) {
    if (/no such table|does not exist/i.test(String((error as Error)?.message))) return [];
    throw error;
  }
}

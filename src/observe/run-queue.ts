import { num } from "./agent-tables.js";
import type { ReadStore } from "./read-store.js";

/**
 * A run's place in the scheduler's queues, as the dashboard shows it: the Task row
 * (`cairn_queue_runs`) of a run enqueued on a queue — its queue, priority, partition key and
 * earliest start — and, once dispatched, the decision: which executor took it, when, under which
 * policy (`cancelled` when it was cancelled before any dispatch).
 */
export interface RunQueueView {
  queue: string;
  priority: number;
  partitionKey: string | null;
  dedupKey: string | null;
  notBefore: number | null;
  enqueuedAt: number;
  dispatchedAt: number | null;
  executorId: string | null;
  policy: string | null;
}

/**
 * Whether the scheduler's queue tables exist. The read model never migrates, and a database last
 * opened by a Cairn before queues has none of them: it then has no queued runs, not an error.
 */
export async function hasQueueTables(store: ReadStore): Promise<boolean> {
  try {
    return (await store.select("SELECT 1 AS ok FROM cairn_layer_migrations WHERE layer = 'queues'")).length > 0;
  } catch {
    return false; // no cairn_layer_migrations either: a database from before layers
  }
}

/** The queue a run was enqueued on, or null for a run started directly (or a database without queues). */
export async function loadRunQueue(store: ReadStore, runId: string): Promise<RunQueueView | null> {
  if (!(await hasQueueTables(store))) return null;
  const [row] = await store.select<Record<string, unknown>>(
    `SELECT queue, priority, partition_key, dedup_key, not_before, enqueued_at, dispatched_at, executor_id, policy
     FROM cairn_queue_runs WHERE run_id = $1`,
    [runId],
  );
  if (row === undefined) return null;
  const maybe = (value: unknown): number | null => (value === null || value === undefined ? null : num(value));
  return {
    queue: String(row.queue),
    priority: num(row.priority),
    partitionKey: row.partition_key === null ? null : String(row.partition_key),
    dedupKey: row.dedup_key === null ? null : String(row.dedup_key),
    notBefore: maybe(row.not_before),
    enqueuedAt: num(row.enqueued_at),
    dispatchedAt: maybe(row.dispatched_at),
    executorId: row.executor_id === null ? null : String(row.executor_id),
    policy: row.policy === null ? null : String(row.policy),
  };
}

/**
 * Every queue name, for the run list's filter: the declared queues (`cairn_queues`, a handful of
 * rows). A run enqueued by plain SQL on a queue no code declared is still found by its name.
 */
export async function listQueueNames(store: ReadStore): Promise<string[]> {
  if (!(await hasQueueTables(store))) return [];
  const rows = await store.select<{ name: string }>("SELECT name FROM cairn_queues ORDER BY name");
  return rows.map((r) => String(r.name));
}

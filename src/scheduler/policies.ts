/**
 * Dispatch policies, each one query. A dispatch asks its queue's policy for the next
 * (run, executor) pair again and again, inside one transaction, until the policy returns nothing;
 * each answer is committed as a decision in `cairn_queue_runs` (executor_id, dispatched_at, policy).
 * For these built-in policies the dispatch computes many of those answers in one statement
 * (dispatch-sql.ts, batchSql: the same decisions, in the same order); a user policy is asked one
 * pair at a time.
 *
 * A policy reads one relation, `candidates`: every pair the queue's limits allow right now — a run
 * that may start (not delayed, its queue under its concurrency and rate limit, its partition under
 * its partition limit) with an executor that may take it (alive, serving the queue, under its
 * capacity and the queue's per-executor limit). Its columns:
 *
 * | column | meaning |
 * |---|---|
 * | `run_id`, `workflow`, `partition_key`, `priority`, `enqueued_at` | the run (lower priority first) |
 * | `wait_ms` | how long it has been ready (now − later of enqueued_at and its delayed start) |
 * | `partition_running` | runs of its partition key running in this queue now (fair sharing) |
 * | `executor_id`, `capacity`, `in_use`, `free` | the executor and its load (`free` = capacity − in_use) |
 * | `queue_in_use` | this queue's runs on the executor |
 * | `is_self` | 1 for the executor doing the dispatch, else 0 |
 * | `serves_partition` | 1 when the executor serves the run's partition key |
 * | `locality_wait_ms` | the queue's `localityWaitMs` |
 *
 * `candidates` holds the oldest 100 ready runs by priority and age, and the first ready run of
 * every partition key (dispatch-sql.ts, SHORTLIST): a decision costs the same with 10 runs waiting
 * or 10,000. A policy that would reach deeper (newest first, say) sees that shortlist.
 *
 * A policy returns `run_id, executor_id`; its first row is taken. Ordering by
 * `partition_running` before `enqueued_at` is what keeps a tenant with 10,000 queued runs from
 * starving one with 3: the next run comes from the partition running the fewest.
 */
export type BuiltInPolicy = "fifo" | "least_loaded" | "locality";

/** The oldest ready run, to the executor doing the dispatch when it can take it (the paper's FIFO). */
const FIFO = `SELECT run_id, executor_id FROM candidates
ORDER BY priority, partition_running, enqueued_at, run_id, is_self DESC, executor_id`;

/** FIFO, plus one ORDER BY term: the executor with the most free capacity. */
const LEAST_LOADED = `SELECT run_id, executor_id FROM candidates
ORDER BY priority, partition_running, enqueued_at, run_id, free DESC, executor_id`;

/** FIFO, plus a partition predicate: only executors serving the run's partition, until it waited locality_wait_ms. */
const LOCALITY = `SELECT run_id, executor_id FROM candidates
WHERE serves_partition = 1 OR wait_ms >= locality_wait_ms
ORDER BY priority, partition_running, enqueued_at, run_id, serves_partition DESC, free DESC, executor_id`;

export const POLICIES: Record<BuiltInPolicy, string> = { fifo: FIFO, least_loaded: LEAST_LOADED, locality: LOCALITY };

export function isBuiltInPolicy(policy: string): policy is BuiltInPolicy {
  return Object.hasOwn(POLICIES, policy);
}

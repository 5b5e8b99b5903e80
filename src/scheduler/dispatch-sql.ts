import type { Statement } from "../store/connection.js";
import type { SqlDialect } from "../store/dialect.js";

/**
 * The statements of a queue's dispatch, written once for both backends. The limits live here, in
 * the `candidates` relation every policy reads, so that no policy — built in or the user's — can
 * break one: a policy only chooses among the pairs the limits allow.
 *
 * Parameters of `next`: $1 queue, $2 now, $3 the dispatching executor, $4 the oldest heartbeat
 * that still counts as alive (now − lease).
 *
 * `MATERIALIZED`: the few live executors and the ready runs are each computed once, then paired;
 * inlined, the planner re-derived the executors for every ready run (20 ms a decision at 300 runs).
 */
/**
 * The waiting run's row is still enqueued (not cancelled meanwhile). Written so no index can serve
 * it: the run must be found by its primary key from the queue row, never by scanning the claim
 * index's `status = 'enqueued'` entries once per queued run — which a planner without fresh
 * statistics chose (quadratic in the backlog: 7 ms a decision at 200 queued runs).
 */
const STILL_ENQUEUED = `r.status || '' = 'enqueued'`;

/**
 * Queue row `x`'s run is still enqueued (and `also` holds of it, over `r`): a scalar subquery by
 * primary key, evaluated for each queue row the statement reaches — never EXISTS, which the planner
 * may turn into a join that starts from `cairn_runs`. It did: a decision's oldest waiting runs were
 * found by walking every row of `cairn_runs` (30,000 queued: 19 ms a decision, linear in the
 * runs of the whole database) instead of the queue's waiting index in order, up to the shortlist.
 */
const stillEnqueued = (x: string, also = "") => `(SELECT 1 FROM cairn_runs r WHERE r.id = ${x}.run_id AND ${STILL_ENQUEUED}${also}) IS NOT NULL`;

/**
 * The runs of the queue that are live are found from the live runs (few), never from the queue's
 * dispatch history (which only grows): SQLite took the history's index when it could.
 */
const notByQueueIndex = (queue: string) => `t.queue || '' = ${queue}`;

/**
 * A decision reads a shortlist, not the whole backlog: the oldest SHORTLIST waiting runs by
 * priority and age, and the first waiting run of every partition key (found by a skip scan over
 * the partition index, one step per key) — all that FIFO, least-loaded, locality and fair sharing
 * need, at a cost that does not grow with a tenant's 10,000 queued runs.
 */
const SHORTLIST = 100;

/**
 * Where a statement finds its parameters (SQL expressions): the queue, now, the dispatching
 * executor (NULL: none, every decision a peer's) and the oldest heartbeat that still counts as
 * alive. A statement sent on its own has them as $1..$4; the enqueue function, its own ($14, …).
 */
export interface DispatchParams {
  queue: string;
  now: string;
  dispatcher: string;
  oldestHeartbeat: string;
}

const STATEMENT_PARAMS: DispatchParams = { queue: "$1", now: "$2", dispatcher: "$3", oldestHeartbeat: "$4" };

/**
 * How a statement draws its shortlist: how many of the oldest waiting runs (an SQL expression),
 * and in which order. Every statement but one reads the SHORTLIST oldest by priority and age; the
 * batch read on SQLite (`nextBatch`) reads only as many as it can decide plus one, in an order
 * without ties (see batchSql, `sized`).
 */
interface Shortlist {
  limit: string;
  order: (x: string) => string;
}

/**
 * A run about to be enqueued, as SQL expressions (the enqueue function's parameters): the one
 * ready run of an `incoming` candidates relation (see candidatesSql).
 */
export interface IncomingRun {
  id: string;
  workflow: string;
  appVersion: string;
  partitionKey: string;
  priority: string;
  enqueuedAt: string;
  notBefore: string;
}

const FIXED_SHORTLIST: Shortlist = { limit: String(SHORTLIST), order: (x) => `${x}.priority, ${x}.enqueued_at` };
const SIZED_SHORTLIST: Shortlist = { limit: "(SELECT n + 1 FROM room)", order: (x) => `${x}.priority, ${x}.enqueued_at, ${x}.run_id` };

/**
 * The `candidates` relation (see policies.ts) and the CTEs it is built from. Its ready runs come
 * from the queue's waiting runs (a shortlist), or, `incoming`, are the one run an enqueue is
 * about to write, read from its parameters instead of from rows: when no other run of the queue is
 * ready, the shortlist would hold that run alone, and this is the same relation — the same limits,
 * the same columns — for the policy to choose from before the run is written (enqueue-function.ts).
 */
export function candidatesSql(d: SqlDialect, source: Shortlist | { incoming: IncomingRun } = FIXED_SHORTLIST, at = STATEMENT_PARAMS): string {
  const now = d.bigint(at.now);
  const queue = at.queue;
  const waiting = (x: string) =>
    `${x}.queue = ${queue} AND ${x}.dispatched_at IS NULL AND (${x}.not_before IS NULL OR ${x}.not_before <= ${now})
      AND ${stillEnqueued(x)}`;
  const underPartitionLimit = (key: string) =>
    `(${key} IS NULL OR (SELECT partition_concurrency FROM q) IS NULL OR COALESCE(pl.n, 0) < (SELECT partition_concurrency FROM q))`;
  let shortlisted: string;
  let ready: string;
  if ("incoming" in source) {
    const run = source.incoming;
    const key = d.text(run.partitionKey);
    const enqueuedAt = d.bigint(run.enqueuedAt);
    const notBefore = d.bigint(run.notBefore);
    shortlisted = "";
    ready = `
  SELECT ${d.text(run.id)} AS run_id, ${d.text(run.workflow)} AS workflow, ${d.text(run.appVersion)} AS app_version,
    ${key} AS partition_key, ${run.priority} AS priority, ${enqueuedAt} AS enqueued_at,
    ${now} - (CASE WHEN ${notBefore} > ${enqueuedAt} THEN ${notBefore} ELSE ${enqueuedAt} END) AS wait_ms,
    COALESCE(pl.n, 0) AS partition_running
  FROM (SELECT 1 AS one) incoming
  LEFT JOIN partition_load pl ON pl.partition_key = ${key}
  WHERE (${notBefore} IS NULL OR ${notBefore} <= ${now}) AND EXISTS (SELECT 1 FROM open) AND ${underPartitionLimit(key)}`;
  } else {
    shortlisted = `
keys(k) AS (
  SELECT MIN(partition_key) FROM cairn_queue_runs WHERE queue = ${queue} AND dispatched_at IS NULL AND partition_key IS NOT NULL
  UNION ALL
  SELECT (SELECT MIN(x.partition_key) FROM cairn_queue_runs x WHERE x.queue = ${queue} AND x.dispatched_at IS NULL AND x.partition_key > keys.k)
  FROM keys WHERE keys.k IS NOT NULL),
oldest AS (
  SELECT x.run_id, x.priority, x.enqueued_at FROM cairn_queue_runs x WHERE ${waiting("x")}
    ORDER BY ${source.order("x")} LIMIT ${source.limit}),
shortlist AS (
  SELECT run_id FROM oldest
  UNION
  SELECT (SELECT x.run_id FROM cairn_queue_runs x WHERE ${waiting("x")} AND x.partition_key = keys.k
    ORDER BY ${source.order("x")} LIMIT 1) FROM keys WHERE keys.k IS NOT NULL),`;
    ready = `
  SELECT t.run_id, r.workflow, r.app_version, t.partition_key, t.priority, t.enqueued_at,
    ${now} - (CASE WHEN t.not_before > t.enqueued_at THEN t.not_before ELSE t.enqueued_at END) AS wait_ms,
    COALESCE(pl.n, 0) AS partition_running
  FROM cairn_queue_runs t
  JOIN cairn_runs r ON r.id = t.run_id
  LEFT JOIN partition_load pl ON pl.partition_key = t.partition_key
  WHERE ${d.inRows("t.run_id", "SELECT run_id FROM shortlist")} AND t.dispatched_at IS NULL AND ${STILL_ENQUEUED}
    AND (t.not_before IS NULL OR t.not_before <= ${now})
    AND EXISTS (SELECT 1 FROM open) AND ${underPartitionLimit("t.partition_key")}`;
  }
  return `WITH RECURSIVE q AS (SELECT * FROM cairn_queues WHERE name = ${queue}),${shortlisted}
active AS MATERIALIZED (
  SELECT t.run_id, t.partition_key, r.executor_id, r.status FROM cairn_runs r
  JOIN cairn_queue_runs t ON t.run_id = r.id
  WHERE r.status IN ('running', 'waiting') AND ${notByQueueIndex(queue)} AND t.dispatched_at IS NOT NULL),
open AS (
  SELECT 1 AS ok FROM q
  WHERE (q.concurrency IS NULL OR (SELECT COUNT(*) FROM active) < q.concurrency)
    AND (q.rate_limit IS NULL OR (SELECT COUNT(*) FROM cairn_queue_runs d
      WHERE d.queue = ${queue} AND d.dispatched_at > ${now} - q.rate_period_ms AND d.policy <> 'cancelled') < q.rate_limit)),
partition_load AS (SELECT partition_key, COUNT(*) AS n FROM active WHERE partition_key IS NOT NULL GROUP BY partition_key),
ready AS MATERIALIZED (${ready}),
workers AS MATERIALIZED (
  SELECT e.id AS executor_id, e.app_version, e.capacity,
    (SELECT COUNT(*) FROM cairn_runs x WHERE x.executor_id = e.id AND x.status = 'running') AS in_use,
    (SELECT COUNT(*) FROM active a WHERE a.executor_id = e.id AND a.status = 'running') AS queue_in_use,
    CASE WHEN e.id = ${d.text(at.dispatcher)} THEN 1 ELSE 0 END AS is_self
  FROM cairn_executors e
  JOIN cairn_executor_queues eq ON eq.executor_id = e.id AND eq.queue = ${queue}
  WHERE e.heartbeat_at >= ${d.bigint(at.oldestHeartbeat)} AND e.capacity IS NOT NULL),
candidates AS (
  SELECT ready.run_id, ready.workflow, ready.partition_key, ready.priority, ready.enqueued_at, ready.wait_ms,
    ready.partition_running, w.executor_id, w.capacity, w.in_use, w.capacity - w.in_use AS free, w.queue_in_use, w.is_self,
    CASE WHEN EXISTS (SELECT 1 FROM cairn_executor_partitions p
      WHERE p.executor_id = w.executor_id AND p.partition_key = ready.partition_key) THEN 1 ELSE 0 END AS serves_partition,
    (SELECT locality_wait_ms FROM q) AS locality_wait_ms
  FROM ready
  JOIN workers w ON w.in_use < w.capacity AND w.app_version = ready.app_version
    AND ((SELECT worker_concurrency FROM q) IS NULL OR w.queue_in_use < (SELECT worker_concurrency FROM q)))`;
}

/** The next decision under `policySql`: one row (run_id, executor_id) or none. */
export function nextDecision(d: SqlDialect, policySql: string): Statement {
  return { text: `${candidatesSql(d)}\nSELECT p.run_id, p.executor_id FROM (${policySql}) p LIMIT 1` };
}

/**
 * The executor the policy gives a run about to be enqueued (`incoming`, see candidatesSql), when
 * it will be the only ready run of its queue: one row (executor_id) or none.
 */
export function incomingDecision(d: SqlDialect, policySql: string, run: IncomingRun, at: DispatchParams): string {
  return `${candidatesSql(d, { incoming: run }, at)}\nSELECT p.executor_id FROM (${policySql}) p LIMIT 1`;
}

/**
 * The time a decision is recorded at: the dispatcher's now, but never before the run was enqueued.
 * The two are different processes' clocks (or one clock read at different moments: a dispatcher
 * reads now, then an enqueue commits with a later now before the dispatcher's statement sees it),
 * and a record saying a run was taken before it was queued would be read as a lie.
 */
function dispatchedAt(d: SqlDialect, table: string, now: string): string {
  return d.greatest(`${table}.enqueued_at`, d.bigint(now));
}

/**
 * PostgreSQL only: the next decision, taken and recorded in one statement (one round trip instead
 * of three; SQLite, in-process, has no data-modifying CTEs and needs none). $5 is the policy's name.
 */
export function decideInOne(d: SqlDialect, policySql: string): Statement {
  return {
    text: `${candidatesSql(d)},
pick AS (SELECT p.run_id, p.executor_id FROM (${policySql}) p LIMIT 1),
take AS (
  UPDATE cairn_runs r SET status = 'running', executor_id = pick.executor_id, updated_at = ${d.bigint("$2")}
  FROM pick WHERE r.id = pick.run_id AND r.status = 'enqueued' RETURNING r.id, r.executor_id)
UPDATE cairn_queue_runs t SET dispatched_at = ${dispatchedAt(d, "t", "$2")}, executor_id = take.executor_id, policy = ${d.text("$5")}
FROM take WHERE t.run_id = take.id RETURNING t.run_id, t.executor_id`,
  };
}

/**
 * Several decisions in one statement, for the built-in policies: the same decisions, in the same
 * order, as asking the policy again and again — computed at once instead of rebuilding
 * `candidates` for each (one statement per decision was ~11 ms on PostgreSQL, ~90 runs/s).
 *
 * How: the ready runs are numbered in the policy's run order, the executors' free slots in its
 * executor order, and run n goes to slot n. That is exact because every term a decision changes
 * is known in advance:
 *
 * - an executor's slots: min(capacity − in_use, workerConcurrency − queue_in_use), one row each,
 *   ordered as the policy orders executors — FIFO: the dispatcher first, then by id; least-loaded
 *   (and locality without partition keys): by the free capacity the executor will have when that
 *   slot is taken (free − j + 1), descending, then by id — the greedy sequence, water-filling;
 * - global concurrency and the rate limit: at most `concurrency − active` and
 *   `rate_limit − dispatched in the window` decisions (every decision of a statement has one time);
 * - fair sharing and the per-key limit: the k-th ready run of a key will be decided when its key runs
 *   `partition_running + k − 1` (only its own key's decisions change that), so that is its `share`,
 *   the term policies order by, and a run whose share reaches the key's limit is left out;
 * - runs beyond the shortlist: when the shortlist is full, a run not on it could come before some
 *   on it (a light tenant's second run, say). Its order key is at least the bound of its key (the
 *   last listed run of the key, one share later) or, for a run without a key, the last of the oldest
 *   runs; only runs strictly before every bound are decided here, the rest by the next statement.
 *
 * Where that does not hold — runs or executors of different app versions (not every run may go
 * to every slot), "locality" with partition keys (which executors a run may go to depends on its
 * key) — or where it decides nothing (every run ties with a bound), the statement makes one
 * decision under the policy's own query, exactly as before. User policies never come here.
 *
 * Parameters: as `next`, plus $5 the policy's name and $6 the most decisions to make. Columns:
 * run_id, executor_id, again (1 when another statement at this instant may decide more).
 */
export type BatchPolicy = "fifo" | "least_loaded" | "locality";

function batchSql(d: SqlDialect, policy: BatchPolicy, policySql: string, fallback: boolean, sized = false): string {
  const now = d.bigint("$2");
  const most = d.bigint("$6");
  // Sized (SQLite): run_id breaks the ties of the shortlist's order, so a bound is one run, not
  // every run of its millisecond (see `room` below).
  const sameAge = (b: string) => (sized ? `(e.enqueued_at < ${b}.be OR (e.enqueued_at = ${b}.be AND e.run_id < ${b}.br))` : `e.enqueued_at < ${b}.be`);
  const before = (b: string) => `(e.priority < ${b}.bp OR (e.priority = ${b}.bp AND (e.share < ${b}.bs OR (e.share = ${b}.bs AND ${sameAge(b)}))))`;
  const slotOrder = policy === "fifo" ? "w.is_self DESC, w.executor_id, s.j" : "w.capacity - w.in_use - s.j DESC, w.executor_id, s.j";
  const runFilter = policy === "locality" ? "WHERE wait_ms >= (SELECT locality_wait_ms FROM q)" : "";
  const localityGuard = policy === "locality" ? "AND NOT EXISTS (SELECT 1 FROM ready WHERE partition_key IS NOT NULL)" : "";
  const concLeft = `CASE WHEN q.concurrency IS NULL THEN ${most} ELSE q.concurrency - (SELECT COUNT(*) FROM active) END`;
  const rateLeft = `CASE WHEN q.rate_limit IS NULL THEN ${most} ELSE q.rate_limit - (SELECT COUNT(*) FROM cairn_queue_runs d
      WHERE d.queue = $1 AND d.dispatched_at > ${now} - q.rate_period_ms AND d.policy <> 'cancelled') END`;
  // Sized: `room` is how many decisions this statement can make at most — the free slots of every
  // live executor serving the queue (capacity and workerConcurrency), the global concurrency and
  // rate limit left, and $6 — and the shortlist holds that many oldest runs plus one (the bound).
  // Every bound stays exact for a shortlist of any length (see above); a shorter one only means
  // fewer rows to number and sort: a pass that can fill 16 slots read 100 runs before (the cost of
  // the statement grew with the shortlist: 5.8M instructions at 100, 1.8M at 17, on SQLite).
  // A batch that filled `capacity` says so (`again` 0): nothing more can be decided now.
  const slotsOf = (w: string) =>
    `CASE WHEN q.worker_concurrency IS NULL OR q.worker_concurrency - ${w}.queue_in_use > ${w}.capacity - ${w}.in_use
      THEN ${w}.capacity - ${w}.in_use ELSE q.worker_concurrency - ${w}.queue_in_use END`;
  // Each term once, materialized: flattened, SQLite copied the counts into every branch of the CASE.
  const room = sized
    ? `
room_left AS MATERIALIZED (
  SELECT ${concLeft} AS c, ${rateLeft} AS r,
    (SELECT COALESCE(SUM(CASE WHEN ${slotsOf("w")} > 0 THEN ${slotsOf("w")} ELSE 0 END), 0) FROM workers w) AS s
  FROM q),
room AS MATERIALIZED (
  SELECT capacity, CASE WHEN capacity > ${most} THEN ${most} ELSE capacity END AS n FROM (
    SELECT CASE WHEN c <= 0 OR r <= 0 OR s <= 0 THEN 0 WHEN c <= r AND c <= s THEN c WHEN r <= s THEN r ELSE s END AS capacity
    FROM room_left) x),`
    : "";
  return `${candidatesSql(d, sized ? SIZED_SHORTLIST : FIXED_SHORTLIST)},${room}
seq(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM seq WHERE j < ${sized ? "(SELECT n FROM room)" : most}),
lim AS (
  SELECT q.partition_concurrency AS pc,
    ${sized ? "(SELECT c FROM room_left)" : concLeft} AS conc_left,
    ${sized ? "(SELECT r FROM room_left)" : rateLeft} AS rate_left,
    CASE WHEN (SELECT COUNT(*) FROM oldest) >= ${sized ? "(SELECT n + 1 FROM room)" : SHORTLIST} THEN 1 ELSE 0 END AS full_list
  FROM q),
batchable AS (
  SELECT 1 AS ok WHERE (SELECT COUNT(DISTINCT v.app_version) FROM
    (SELECT app_version FROM ready UNION ALL SELECT app_version FROM workers) v) <= 1 ${localityGuard}),
ranked AS (
  SELECT run_id, partition_key, priority, enqueued_at,
    CASE WHEN partition_key IS NULL THEN 0
      ELSE partition_running + ROW_NUMBER() OVER (PARTITION BY partition_key ORDER BY priority, enqueued_at, run_id) - 1 END AS share
  FROM ready ${runFilter}),
bounds AS MATERIALIZED (
  SELECT * FROM (SELECT priority AS bp, 0 AS bs, enqueued_at AS be${sized ? ", run_id AS br" : ""} FROM oldest ORDER BY priority DESC, enqueued_at DESC${sized ? ", run_id DESC" : ""} LIMIT 1) last_oldest
  WHERE EXISTS (SELECT 1 FROM cairn_queue_runs n WHERE n.queue = $1 AND n.dispatched_at IS NULL AND n.partition_key IS NULL)
  UNION ALL
  SELECT priority, share + 1, enqueued_at${sized ? ", run_id" : ""} FROM (
    SELECT priority, share, enqueued_at${sized ? ", run_id" : ""}, ROW_NUMBER() OVER (PARTITION BY partition_key ORDER BY share DESC) AS k
    FROM ranked WHERE partition_key IS NOT NULL) last_of_key WHERE k = 1),
eligible AS (
  SELECT e.run_id, e.priority, e.share, e.enqueued_at FROM ranked e, lim
  WHERE (lim.pc IS NULL OR e.partition_key IS NULL OR e.share < lim.pc)
    AND (lim.full_list = 0 OR NOT EXISTS (SELECT 1 FROM bounds b WHERE NOT ${before("b")}))),
ordered AS (
  SELECT run_id, ROW_NUMBER() OVER (ORDER BY priority, share, enqueued_at, run_id) AS n, COUNT(*) OVER () AS eligible_count FROM eligible),
slots AS (
  SELECT w.executor_id, ROW_NUMBER() OVER (ORDER BY ${slotOrder}) AS n
  FROM workers w JOIN seq s ON s.j <= w.capacity - w.in_use
    AND ((SELECT worker_concurrency FROM q) IS NULL OR s.j <= (SELECT worker_concurrency FROM q) - w.queue_in_use)),
paired AS (
  SELECT o.run_id, sl.executor_id, o.eligible_count, lim.full_list FROM ordered o JOIN slots sl ON sl.n = o.n, lim
  WHERE EXISTS (SELECT 1 FROM batchable) AND o.n <= ${most} AND o.n <= lim.conc_left AND o.n <= lim.rate_left),
pick AS (
  SELECT run_id, executor_id, CASE WHEN COUNT(*) OVER () < eligible_count${sized ? " OR COUNT(*) OVER () >= (SELECT capacity FROM room)" : ""} THEN 0 ELSE full_list END AS again
  FROM paired${
    fallback
      ? `
  UNION ALL
  SELECT one.run_id, one.executor_id, 1 FROM (SELECT p.run_id, p.executor_id FROM (${policySql}) p LIMIT 1) one
  WHERE NOT EXISTS (SELECT 1 FROM paired)`
      : ""
  })`;
}

/**
 * The decisions of {@link batchSql}, read (SQLite: the dispatch then writes each, in-process),
 * without the one-decision fallback: when the batch decides nothing, the caller asks
 * {@link nextDecision} itself — a second statement costs no round trip in-process, and evaluated
 * inside this one the fallback sorted every candidate at each dispatch (a sixth of its work).
 */
export function nextBatch(d: SqlDialect, policy: BatchPolicy, policySql: string): Statement {
  return { text: `${batchSql(d, policy, policySql, false, true)}\nSELECT run_id, executor_id, again, ${d.text("$5")} AS policy FROM pick` };
}

/** PostgreSQL: the decisions of {@link batchSql}, taken and recorded in the same statement. */
export function decideBatch(d: SqlDialect, policy: BatchPolicy, policySql: string): Statement {
  return {
    text: `${batchSql(d, policy, policySql, true)},
take AS (
  UPDATE cairn_runs r SET status = 'running', executor_id = pick.executor_id, updated_at = ${d.bigint("$2")}
  FROM pick WHERE r.id = pick.run_id AND r.status = 'enqueued' RETURNING r.id, r.executor_id)
UPDATE cairn_queue_runs t SET dispatched_at = ${dispatchedAt(d, "t", "$2")}, executor_id = take.executor_id, policy = ${d.text("$5")}
FROM take JOIN pick ON pick.run_id = take.id WHERE t.run_id = take.id RETURNING t.run_id, t.executor_id, pick.again`,
  };
}

/**
 * One look at every queue of a dispatcher ($1 list, $2 now, $3 the dispatcher, $4 the oldest live
 * heartbeat), before any lock. Per queue: whether a run is ready now (`ready`), the next delayed
 * start (`delayed`, for the wake-up timer), and whether anything could be dispatched at all
 * (`open`): the queue under its concurrency and rate limit, and a live executor serving it with a
 * free slot (capacity and `workerConcurrency`) and the app version of a ready run. `open` is exact
 * for those limits and a superset for the others (partition limits, locality, a user policy): a
 * "no" is always right, and a "yes" on a queue with such limits is checked by the exact look
 * (`next`) before the write lock is taken. Before, this was three statements a pass, one of them
 * the whole `candidates` relation — sent as text, which PostgreSQL planned anew each time (~14 ms
 * of its CPU, per pass of every executor) — and an aggregate over every waiting run.
 */
export function lookSql(d: SqlDialect): string {
  const now = d.bigint("$2");
  const waiting = `t.queue = q.name AND t.dispatched_at IS NULL AND (t.not_before IS NULL OR t.not_before <= ${now})`;
  return `SELECT q.name AS queue,
  CASE WHEN ${runReadySql(d, "q.name")} THEN 1 ELSE 0 END AS ready,
  (SELECT MIN(t.not_before) FROM cairn_queue_runs t WHERE t.queue = q.name AND t.dispatched_at IS NULL AND t.not_before > ${now}) AS delayed,
  CASE WHEN (q.concurrency IS NULL OR (SELECT COUNT(*) FROM cairn_runs r JOIN cairn_queue_runs t ON t.run_id = r.id
    WHERE r.status IN ('running', 'waiting') AND t.queue || '' = q.name AND t.dispatched_at IS NOT NULL) < q.concurrency)
  AND (q.rate_limit IS NULL OR (SELECT COUNT(*) FROM cairn_queue_runs d
    WHERE d.queue = q.name AND d.dispatched_at > ${now} - q.rate_period_ms AND d.policy <> 'cancelled') < q.rate_limit)
  AND EXISTS (SELECT 1 FROM cairn_executors e JOIN cairn_executor_queues eq ON eq.executor_id = e.id AND eq.queue = q.name
    WHERE e.heartbeat_at >= ${d.bigint("$4")} AND e.capacity IS NOT NULL
      AND (SELECT COUNT(*) FROM cairn_runs x WHERE x.executor_id = e.id AND x.status = 'running') < e.capacity
      AND (q.worker_concurrency IS NULL OR (SELECT COUNT(*) FROM cairn_runs x JOIN cairn_queue_runs t ON t.run_id = x.id
        WHERE x.executor_id = e.id AND x.status = 'running' AND t.queue || '' = q.name AND t.dispatched_at IS NOT NULL) < q.worker_concurrency)
      AND EXISTS (SELECT 1 FROM cairn_queue_runs t WHERE ${waiting}
        AND ${stillEnqueued("t", " AND r.app_version = e.app_version")}))
  THEN 1 ELSE 0 END AS open
FROM cairn_queues q WHERE ${d.inList("q.name", "$1")} AND ${d.text("$3")} IS NOT NULL`;
}

/** Whether a run of queue `queue` (an SQL expression) is ready at `now` (default $2): waiting, due, still enqueued. */
export function runReadySql(d: SqlDialect, queue: string, now = "$2"): string {
  return `EXISTS (SELECT 1 FROM cairn_queue_runs t WHERE t.queue = ${queue} AND t.dispatched_at IS NULL
    AND (t.not_before IS NULL OR t.not_before <= ${d.bigint(now)})
    AND ${stillEnqueued("t")})`;
}

/**
 * PostgreSQL: the advisory lock dispatchers of one queue take turns on (key: this constant and
 * the hash of the queue's name; a collision only makes two queues take turns). An advisory lock,
 * not a lock on the queue's row: taking it writes nothing, so a pass that decides nothing commits
 * nothing — a row lock is a write, and its commit waited for a WAL flush.
 */
export const QUEUE_LOCK_KEY = 0x6361_6972; // "cair"

/**
 * PostgreSQL: taken (exclusive, tried) by an enqueue before it tries its queue's lock, held to its
 * commit — so a dispatcher that finds the queue's lock held can tell (by trying this one shared)
 * whether the holder may be an enqueue, which hears no wake-up of what commits meanwhile (see
 * dispatch-function.ts, step 2). Keyed by the queue as QUEUE_LOCK_KEY is.
 */
export const ENQUEUE_HOLDER_KEY = 0x6361_6973; // "cais"

export function dispatchStatements(d: SqlDialect) {
  const s = (name: string, text: string): Statement => ({ name: `cairn_queue_${name}`, text });
  return {
    /** Dispatchers of one queue take turns (PostgreSQL; SQLite's writer is alone anyway). */
    lockQueue: s(
      "lock",
      d.name === "postgres" ? `SELECT pg_advisory_xact_lock(${QUEUE_LOCK_KEY}, hashtext($1))` : `SELECT name FROM cairn_queues WHERE name = $1`,
    ),
    /**
     * SQLite (PostgreSQL takes and records in the deciding statement): the runs of a statement's
     * decisions that go to one executor, taken at once — $1 the runs (a JSON list), $2 the
     * executor, $3 now; returns the ids taken, each a run still enqueued. (A statement per run,
     * twice, was a sixth of the CPU a queued one-step run cost, where a pass decides up to 16 at a
     * time.) Each run is found by its key: written `status = 'enqueued'`, SQLite scanned the claim
     * index's queued runs instead (0.9 ms a call at 10,000).
     */
    takeRuns: s(
      "take_runs",
      `UPDATE cairn_runs SET status = 'running', executor_id = $2, updated_at = $3
       WHERE ${d.inList("id", "$1")} AND status || '' = 'enqueued' RETURNING id`,
    ),
    /** SQLite: the same decisions ($1 runs, $2 executor) recorded, at $3 under policy $4, for anyone to read in SQL. */
    recordAll: s(
      "record_all",
      `UPDATE cairn_queue_runs SET dispatched_at = ${dispatchedAt(d, "cairn_queue_runs", "$3")}, executor_id = $2, policy = $4 WHERE ${d.inList("run_id", "$1")}`,
    ),
    /** When a rate window of these queues ($1 list) ends, letting a dispatch happen again. */
    nextRateWindow: s(
      "next_rate_window",
      `SELECT MIN(t.dispatched_at + q.rate_period_ms) AS w FROM cairn_queue_runs t JOIN cairn_queues q ON q.name = t.queue
       WHERE ${d.inList("t.queue", "$1")} AND q.rate_limit IS NOT NULL AND t.dispatched_at > ${d.bigint("$2")} - q.rate_period_ms`,
    ),
    /** The runs dispatched to this executor ($1) that it has not loaded: it loads them. */
    assigned: s("assigned", `SELECT id FROM cairn_runs WHERE executor_id = $1 AND status = 'running'`),
    /** Rows of executors that are gone. */
    sweepQueues: s("sweep_queues", `DELETE FROM cairn_executor_queues WHERE executor_id NOT IN (SELECT id FROM cairn_executors)`),
    sweepPartitions: s("sweep_partitions", `DELETE FROM cairn_executor_partitions WHERE executor_id NOT IN (SELECT id FROM cairn_executors)`),
    serveQueue: s(
      "serve_queue",
      `INSERT INTO cairn_executor_queues (executor_id, queue, wake_channel) VALUES ($1, $2, $3)
       ON CONFLICT (executor_id, queue) DO UPDATE SET wake_channel = excluded.wake_channel`,
    ),
    servePartition: s("serve_partition", `INSERT INTO cairn_executor_partitions (executor_id, partition_key) VALUES ($1, $2) ON CONFLICT DO NOTHING`),
    /** $1..$10: a queue's declaration, stored (the latest declaration wins). */
    upsertQueue: s(
      "upsert",
      `INSERT INTO cairn_queues (name, concurrency, worker_concurrency, partition_concurrency, rate_limit, rate_period_ms, priority,
         policy, policy_sql, locality_wait_ms, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
       ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency, worker_concurrency = excluded.worker_concurrency,
         partition_concurrency = excluded.partition_concurrency, rate_limit = excluded.rate_limit,
         rate_period_ms = excluded.rate_period_ms, priority = excluded.priority, policy = excluded.policy,
         policy_sql = excluded.policy_sql, locality_wait_ms = excluded.locality_wait_ms, updated_at = excluded.updated_at`,
    ),
  };
}

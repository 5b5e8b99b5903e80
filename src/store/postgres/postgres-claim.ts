import { POSTGRES } from "../dialect.js";
import { CLAIM_SET } from "../statements.js";

/**
 * PostgreSQL's claim ($1 executor, $2 app version or null, $3 now, $4 dead executors, $5 limit, $6
 * workflows): the runs `claimable` (statements.ts) describes, taken in three branches, each in the
 * order of an index and locking exactly the rows it takes (`SKIP LOCKED`: executors claiming at
 * once take different runs):
 *
 * 1. runs whose executor is gone or judged dead on a heartbeat that has not moved since, oldest
 *    first — work already under way that nobody runs;
 * 2. waiting runs whose timer fell due, earliest due first — the claim index (status,
 *    app_version, wake_at) in its own order;
 * 3. enqueued runs no layer holds, oldest first.
 *
 * Each branch takes what the ones before it left of `$5`. Why not one `ORDER BY created_at` over
 * the OR of the three (as SQLite does): the planner could not walk an index for it, so every claim
 * read and sorted every candidate, then joined the table again by id — with 10,000 runs falling due
 * at once, 20 claims of 512 each sorted the thousands still due (13 ms of a 23 ms claim, which is
 * server time every woken run waits on). Here a claim reads the rows it takes.
 *
 * The order differs from one global oldest-first only where runs of several branches compete
 * for the last free slots: the ones already under way go first (a run started now is younger than
 * the runs already sleeping, so a global order by age mostly said the same), and due runs go by due
 * time, so a backlog of timers drains in the order they fell due.
 *
 * `me` renews the claimant's row and locks it: a peer removing it waits for this claim, or (if it
 * went first) leaves `me` empty and nothing is locked or claimed. A dead executor's runs are taken
 * only if its heartbeat is still the one it was judged dead by. `held`: the layers' `holdsRuns`.
 */
export function claimStatement(held: readonly string[], allVersions: boolean): string {
  const d = POSTGRES;
  // Two texts (two prepared statements): an `IS NULL OR` on the version would keep the planner
  // from walking the claim index (status, app_version, wake_at) in order.
  const version = allVersions ? "$2::text IS NULL" : "app_version = $2";
  const ours = `EXISTS (SELECT 1 FROM me) AND ${version} AND ${d.inList("workflow", "$6")}`;
  const free = held.length === 0 ? "" : ` AND NOT (${held.map((h) => `(${h})`).join(" OR ")})`;
  return `WITH me AS (
      UPDATE cairn_executors SET heartbeat_at = GREATEST(heartbeat_at, $3) WHERE id = $1 RETURNING id
    ), orphaned AS (
      SELECT id FROM cairn_runs
      WHERE ${ours} AND status = 'running' AND (executor_id IS NULL
        OR executor_id IN (
          SELECT e.id FROM cairn_executors e JOIN ${d.deadExecutorTable("$4")} d
            ON e.id = d.id AND e.heartbeat_at = d.heartbeat_at)
        OR executor_id NOT IN (SELECT id FROM cairn_executors))
      ORDER BY created_at LIMIT $5 FOR UPDATE SKIP LOCKED
    ), due AS (
      SELECT id FROM cairn_runs
      WHERE ${ours} AND status = 'waiting' AND wake_at <= $3
      ORDER BY wake_at LIMIT $5 - (SELECT count(*) FROM orphaned) FOR UPDATE SKIP LOCKED
    ), fresh AS (
      SELECT id FROM cairn_runs
      WHERE ${ours} AND status = 'enqueued'${free}
      ORDER BY created_at LIMIT $5 - (SELECT count(*) FROM orphaned) - (SELECT count(*) FROM due) FOR UPDATE SKIP LOCKED
    ), c AS (
      UPDATE cairn_runs SET ${CLAIM_SET}
      WHERE id = ANY(ARRAY(SELECT id FROM orphaned UNION ALL SELECT id FROM due UNION ALL SELECT id FROM fresh))
      RETURNING *)
    SELECT me.id AS claimant, c.*, COALESCE(c.input, pi.body) AS input_text, COALESCE(c.output, po.body) AS output_text
    FROM me
    LEFT JOIN c ON true
    LEFT JOIN cairn_payloads pi ON pi.hash = c.input_hash
    LEFT JOIN cairn_payloads po ON po.hash = c.output_hash
    ORDER BY c.created_at`;
}

import { POSTGRES } from "../dialect.js";
import { CLAIM_SET, claimBranches, columnsOf, PARKER_FIRST, RUN_COLUMNS } from "../statements.js";

/**
 * PostgreSQL's claim ($1 executor, $2 app version or null, $3 now, $4 dead executors, $5 limit, $6
 * workflows, $7 the claimant's own wake channel): the branches of `claimBranches` (statements.ts) —
 * orphaned runs first, then due runs (the claimant's own first: ParkerFirst) and fresh runs by
 * the time they became claimable — each read no further than what is left of `$5` and locking
 * what it reads (`SKIP LOCKED`: executors claiming at once read different runs), then
 * one update of the runs taken, looked up by primary key.
 *
 * Due and fresh runs are merged after they are locked, so a claim that finds both locks up to `$5`
 * rows it does not take, until its statement commits (milliseconds). A peer claiming meanwhile
 * skips them, as it skips the rows taken; they stay claimable, and this claim, having filled its
 * free slots, claims again as its runs let go (Executor.saturated), while due ones keep every
 * executor's timer at now (nextWakeAt). Locking only the merged winners would have every executor
 * read the same candidates and all but one of them come back with nothing.
 *
 * `me` renews the claimant's row and locks it: a peer removing it waits for this claim, or (if it
 * went first) leaves `me` empty and nothing is locked or claimed. A dead executor's runs are taken
 * only if its heartbeat is still the one it was judged dead by. `held`: the layers' `holdsRuns`.
 */
export function claimStatement(held: readonly string[], allVersions: boolean): string {
  const { orphaned, due, fresh } = claimBranches(POSTGRES, held, allVersions, PARKER_FIRST);
  const left = "$5 - (SELECT count(*) FROM orphaned)";
  const branch = (b: { where: string; order: string }, limit: string) =>
    `SELECT id, ${b.order} AS k FROM cairn_runs WHERE EXISTS (SELECT 1 FROM me) AND ${b.where}
      ORDER BY ${b.order} LIMIT ${limit} FOR UPDATE SKIP LOCKED`;
  return `WITH me AS (
      UPDATE cairn_executors SET heartbeat_at = GREATEST(heartbeat_at, $3) WHERE id = $1 RETURNING id
    ), orphaned AS (
      ${branch(orphaned, "$5")}
    ), due AS (
      ${branch(due, left)}
    ), fresh AS (
      ${branch(fresh, left)}
    ), taken AS (
      SELECT id FROM orphaned
      UNION ALL (SELECT id FROM (SELECT id, k FROM due UNION ALL SELECT id, k FROM fresh) ready ORDER BY k LIMIT ${left})
    ), c AS (
      UPDATE cairn_runs SET ${CLAIM_SET}
      WHERE id = ANY(ARRAY(SELECT id FROM taken))
      RETURNING ${RUN_COLUMNS.join(", ")})
    SELECT me.id AS claimant, ${columnsOf("c", RUN_COLUMNS)}, COALESCE(c.input, pi.body) AS input_text, COALESCE(c.output, po.body) AS output_text
    FROM me
    LEFT JOIN c ON true
    LEFT JOIN cairn_payloads pi ON pi.hash = c.input_hash
    LEFT JOIN cairn_payloads po ON po.hash = c.output_hash
    ORDER BY c.created_at`;
}

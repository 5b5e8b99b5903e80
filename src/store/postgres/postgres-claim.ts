import { POSTGRES } from "../dialect.js";
import { CLAIM_SET, claimBranches } from "../statements.js";

/**
 * PostgreSQL's claim ($1 executor, $2 app version or null, $3 now, $4 dead executors, $5 limit, $6
 * workflows): the branches of `claimBranches` (statements.ts) in their order, each taking what the
 * ones before it left of `$5` and locking exactly the rows it takes (`SKIP LOCKED`: executors
 * claiming at once take different runs), then one update of those rows, looked up by primary key.
 *
 * `me` renews the claimant's row and locks it: a peer removing it waits for this claim, or (if it
 * went first) leaves `me` empty and nothing is locked or claimed. A dead executor's runs are taken
 * only if its heartbeat is still the one it was judged dead by. `held`: the layers' `holdsRuns`.
 */
export function claimStatement(held: readonly string[], allVersions: boolean): string {
  const { orphaned, due, fresh } = claimBranches(POSTGRES, held, allVersions);
  const branch = (b: { where: string; order: string }, limit: string) =>
    `SELECT id FROM cairn_runs WHERE EXISTS (SELECT 1 FROM me) AND ${b.where}
      ORDER BY ${b.order} LIMIT ${limit} FOR UPDATE SKIP LOCKED`;
  return `WITH me AS (
      UPDATE cairn_executors SET heartbeat_at = GREATEST(heartbeat_at, $3) WHERE id = $1 RETURNING id
    ), orphaned AS (
      ${branch(orphaned, "$5")}
    ), due AS (
      ${branch(due, "$5 - (SELECT count(*) FROM orphaned)")}
    ), fresh AS (
      ${branch(fresh, "$5 - (SELECT count(*) FROM orphaned) - (SELECT count(*) FROM due)")}
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

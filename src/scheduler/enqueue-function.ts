import type { Statement } from "../store/connection.js";
import { WAKE_CHANNEL } from "../store/postgres/postgres-writes.js";
import { POSTGRES } from "../store/dialect.js";
import { FUNCTION_SETTINGS, functionName, type StoredFunction } from "./dispatch-function.js";
import { runReadySql } from "./dispatch-sql.js";
import { QUEUE_WAKE_PREFIX } from "./wake-payloads.js";

/**
 * PostgreSQL, a queue under a built-in policy: the enqueue that dispatches its own run. One call,
 * one transaction, one WAL flush:
 *
 * 1. The run and its Task row, as the plain enqueue statement writes them (enqueue.ts), the same
 *    conflicts ignored. A run that was there already (same id) returns false, nothing else done.
 * 2. If the run is ready now (no delayed start) and a live executor serves the queue (a queue
 *    filled before its executors start costs no decision), the queue's dispatch function is
 *    called with no dispatcher (dispatch-function.ts, `$3` NULL) for one decision: the policy's,
 *    under the queue's advisory lock (tried, never waited for), the limits as in any pass. The executor it
 *    gives the run to hears of it by the function's `dispatched:<id>` NOTIFY and starts it after
 *    one read (Executor: a pass for its assigned runs alone) — no dispatch transaction, and its
 *    WAL flush, between the enqueue and the run's first line.
 * 3. If its own run was not decided (another dispatcher holds the lock, no executor has a free
 *    slot, the limits hold it, an older run came first), or another run is still ready after the
 *    decision, the `queue:<name>` NOTIFY as before: every executor makes a dispatch pass. (An
 *    executor whose pass found the lock held by this call returned at once, counting on the
 *    holder for whatever was ready — see dispatch-function.ts — and this call decides one run: a
 *    run it leaves ready, behind its own by priority or fair share, or a slot freed meanwhile,
 *    would otherwise wait for a poll.)
 *
 * Before, every executor woke for every enqueue and called the dispatch function (one won, the
 * others found the lock held), and the winner's dispatch was a second transaction with its own
 * WAL flush on the way to the run's first line.
 *
 * Failure semantics: as the plain enqueue — all of it commits, or none. A decision taken here is
 * a peer's decision (see dispatch-function.ts): it names an executor alive within the lease; one
 * that dies before running the run loses it to the takeover of a dead executor's runs, as a run
 * any peer dispatched to it. Parameters: $1..$18 those of the plain enqueue statement, $19 the
 * oldest heartbeat that still counts as alive, $20 the policy's name. Returns whether it created
 * the run.
 */
export function enqueueFunction(dispatch: StoredFunction): StoredFunction {
  const body = `
BEGIN
  INSERT INTO cairn_runs (id, workflow, status, input, input_hash, parent_id, parent_seq, root_id, app_version,
    executor_id, deadline_at, created_at, updated_at, forked_from, forked_from_seq)
  VALUES ($1, $2, $3, $4, NULL, $5, $6, $7, $8, $9, $10, $11, $11, $12, $13) ON CONFLICT (id) DO NOTHING;
  IF NOT FOUND THEN RETURN false; END IF;
  INSERT INTO cairn_queue_runs (run_id, queue, partition_key, priority, dedup_key, not_before, enqueued_at)
  VALUES ($1, $14, $15, $16, $17, $18, $11) ON CONFLICT (run_id) DO NOTHING;
  IF ($18 IS NULL OR $18 <= $11)
    AND EXISTS (SELECT 1 FROM cairn_executor_queues eq JOIN cairn_executors e ON e.id = eq.executor_id
      WHERE eq.queue = $14 AND e.heartbeat_at >= $19 AND e.capacity IS NOT NULL)
    AND EXISTS (SELECT 1 FROM ${dispatch.name}($14, $11, NULL, $19, $20, 1) d WHERE d.run_id = $1) THEN
    -- A dispatcher that found the queue's lock held by this call returned, trusting the holder
    -- with what was ready; this call decides one run. Anything still ready: everyone passes again.
    IF NOT ${runReadySql(POSTGRES, "$14", "$11")} THEN RETURN true; END IF;
  END IF;
  PERFORM pg_notify('${WAKE_CHANNEL}', '${QUEUE_WAKE_PREFIX}' || $14);
  RETURN true;
END`;
  const name = functionName("cairn_enqueue", body);
  const create = `CREATE OR REPLACE FUNCTION ${name}(text, text, text, text, text, integer, text, text, text, bigint, bigint,
  text, integer, text, text, integer, text, bigint, bigint, text)
RETURNS boolean LANGUAGE plpgsql VOLATILE ${FUNCTION_SETTINGS} AS $cairn_fn$${body}$cairn_fn$`;
  const params = Array.from({ length: 20 }, (_, i) => `$${i + 1}`).join(", ");
  const call: Statement = { name: `${name}_call`, text: `SELECT ${name}(${params}) AS created` };
  return { name, create, call };
}

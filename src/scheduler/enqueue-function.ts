import type { Statement } from "../store/connection.js";
import { WAKE_CHANNEL } from "../store/postgres/postgres-writes.js";
import { POSTGRES } from "../store/dialect.js";
import { FUNCTION_SETTINGS, functionName, type StoredFunction } from "./dispatch-function.js";
import { ENQUEUE_HOLDER_KEY, incomingDecision, QUEUE_LOCK_KEY, runReadySql } from "./dispatch-sql.js";
import { DISPATCHED_WAKE_PREFIX, QUEUE_WAKE_PREFIX } from "./wake-payloads.js";
import { HELD_UNLESS_STALE_ROW } from "./schema/queues-extension.js";

/**
 * PostgreSQL, a queue under a built-in policy: the enqueue that dispatches its own run. One call,
 * one transaction, one WAL flush:
 *
 * 1. If the run is ready now (no delayed start), a live executor serves the queue (a queue filled
 *    before its executors start costs no decision) and the run has no dedup key (whose unique
 *    index could refuse it: see below), the queue's advisory lock is tried (QUEUE_LOCK_KEY, never
 *    waited for). Held, and no other run of the queue ready: the run will be the only ready one,
 *    and the policy chooses its executor from the same `candidates` relation a dispatch pass
 *    would build with the run in it — the same limits, the same columns — built from the run's
 *    parameters (dispatch-sql.ts, `incomingDecision`) before anything is written.
 * 2. The run and its Task row, as the plain enqueue statement writes them (enqueue.ts), the same
 *    conflicts ignored — already dispatched when step 1 chose an executor: `running` under that
 *    executor, the decision recorded (dispatched_at, executor_id, policy). Two inserts, where
 *    writing the run `enqueued` and then dispatching it was two inserts and two updates (every
 *    update of a run touches its indexes again: status and executor are indexed), and a decision
 *    statement over the whole queue (0.6 ms of server time a call, against 0.3 ms).
 * 3. Otherwise, when the lock is held here (other runs were ready, or no executor could take this
 *    one) or the run has a dedup key: the queue's dispatch function, called with no dispatcher
 *    (dispatch-function.ts, `$3` NULL), makes one decision under the policy for whichever run
 *    comes first, under the lock this call holds (advisory locks are re-entrant) or tries. With
 *    the lock tried and lost, there is nothing to call: the holder decides, or everyone passes.
 *    A run that was there already (same id) returns false — after a `queue:` NOTIFY if this call
 *    held the lock and a run is ready (a dispatcher that found the lock held trusted this call).
 * 4. The executor given a run hears of it by the `dispatched:<id>` NOTIFY — on its own channel
 *    (`cairn_executor_queues.wake_channel`, its session's: no other executor is woken) — and starts
 *    it after one read (Executor: a pass for its assigned runs alone): no dispatch transaction,
 *    and its WAL flush, between the enqueue and the run's first line. The wake-up carries no more
 *    than the executor's id, never the run's row (which would save that read: p99 ~1.2× lower in
 *    bench:queues): any session of any role that can connect may LISTEN on the channel (it would
 *    read every run's input) or NOTIFY on it (NOTIFY needs no privilege: a forged or replayed
 *    row would start a run no one enqueued, or a finished one again). A hint that asks for a read
 *    is safe to forge; a row to act on is not, short of encrypting and authenticating it.
 * 5. If its own run was not decided (another dispatcher holds the lock, no executor has a free
 *    slot, the limits hold it, an older run came first), or another run is still ready after the
 *    decision, the `queue:<name>` NOTIFY as before: every executor makes a dispatch pass. (An
 *    executor whose pass found the lock held by this call returned at once, counting on the
 *    holder for whatever was ready — see dispatch-function.ts — and this call decides one run: a
 *    run it leaves ready, one committed meanwhile, or a slot freed meanwhile, would otherwise wait
 *    for a poll.)
 *
 * Failure semantics: as the plain enqueue — all of it commits, or none. A decision taken here is
 * a peer's decision (see dispatch-function.ts): it names an executor alive within the lease; one
 * that dies before running the run loses it to the takeover of a dead executor's runs, as a run
 * any peer dispatched to it. Parameters: $1..$18 those of the plain enqueue statement, $19 the
 * oldest heartbeat that still counts as alive, $20 the policy's name. Returns whether it created
 * the run.
 */
export function enqueueFunction(dispatch: StoredFunction, policySql: string): StoredFunction {
  const d = POSTGRES;
  const ready = runReadySql(d, "$14", "$11");
  const decide = incomingDecision(
    d,
    policySql,
    { id: "$1", workflow: "$2", appVersion: "$8", partitionKey: "$15", priority: "$16", enqueuedAt: "$11", notBefore: "$18" },
    { queue: "$14", now: "$11", dispatcher: "NULL", oldestHeartbeat: "$19" },
  );
  // Nested IFs, not one AND: SQL does not promise the order an AND's terms are evaluated in, and
  // the lock must be tried only once the run is known to be ready, its queue served.
  const body = `
DECLARE
  chosen text;
  live boolean := false;
  locked boolean := false;
BEGIN
  IF $3 = 'enqueued' AND ($18 IS NULL OR $18 <= $11) THEN
    live := EXISTS (SELECT 1 FROM cairn_executor_queues eq JOIN cairn_executors e ON e.id = eq.executor_id
      WHERE eq.queue = $14 AND e.heartbeat_at >= $19 AND e.capacity IS NOT NULL);
    -- Not with a dedup key: its unique index can refuse the insert below, and an error would end
    -- this call holding the lock with no wake-up for what a bounced dispatcher trusted it with.
    IF live AND $17 IS NULL THEN
      -- The holder key first: a dispatcher that finds the queue's lock held can tell an enqueue
      -- may hold it, and passes again soon (dispatch-function.ts, step 2).
      IF pg_try_advisory_xact_lock(${ENQUEUE_HOLDER_KEY}, hashtext($14)) THEN
        locked := pg_try_advisory_xact_lock(${QUEUE_LOCK_KEY}, hashtext($14));
      END IF;
      -- One statement, one snapshot: no other run ready, then the policy's choice for this one.
      IF locked THEN chosen := (SELECT CASE WHEN NOT ${ready} THEN (${decide}) END); END IF;
    END IF;
  END IF;
  INSERT INTO cairn_runs (id, workflow, status, input, input_hash, parent_id, parent_seq, root_id, app_version,
    executor_id, deadline_at, created_at, updated_at, forked_from, forked_from_seq, held_by)
  VALUES ($1, $2, CASE WHEN chosen IS NULL THEN $3 ELSE 'running' END, $4, NULL, $5, $6, $7, $8,
    COALESCE(chosen, $9), $10, $11, $11, $12, $13, ${HELD_UNLESS_STALE_ROW}) ON CONFLICT (id) DO NOTHING;
  IF NOT FOUND THEN
    -- The run was there already: nothing written, but the lock was held (see the end).
    IF locked AND ${ready} THEN PERFORM pg_notify('${WAKE_CHANNEL}', '${QUEUE_WAKE_PREFIX}' || $14); END IF;
    RETURN false;
  END IF;
  INSERT INTO cairn_queue_runs (run_id, queue, partition_key, priority, dedup_key, not_before, enqueued_at, dispatched_at, executor_id, policy)
  VALUES ($1, $14, $15, $16, $17, $18, $11, CASE WHEN chosen IS NULL THEN NULL ELSE $11 END, chosen, CASE WHEN chosen IS NULL THEN NULL ELSE $20 END)
  ON CONFLICT (run_id) DO NOTHING;
  IF chosen IS NOT NULL THEN
    -- Only the chosen executor is woken: on its own channel, or the shared one if it has none.
    PERFORM pg_notify(COALESCE((SELECT eq.wake_channel FROM cairn_executor_queues eq WHERE eq.executor_id = chosen AND eq.queue = $14),
      '${WAKE_CHANNEL}'), '${DISPATCHED_WAKE_PREFIX}' || chosen);
  ELSIF live AND (locked OR ($17 IS NOT NULL AND pg_try_advisory_xact_lock(${ENQUEUE_HOLDER_KEY}, hashtext($14)))) THEN
    -- Other runs were ready, or none of the executors could take this one: one decision under the
    -- policy, whichever run comes first (under the lock this call holds, or tries). (OR's order
    -- does not matter here: with the lock held, the holder key is too.)
    IF EXISTS (SELECT 1 FROM ${dispatch.name}($14, $11, NULL, $19, $20, 1) d WHERE d.run_id = $1) THEN chosen := $1; END IF;
  END IF;
  -- A dispatcher that found the queue's lock held by this call returned, trusting the holder
  -- with what was ready: anything still ready, everyone passes again.
  IF chosen IS NOT NULL AND NOT ${ready} THEN RETURN true; END IF;
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

import { createHash } from "node:crypto";
import type { Statement } from "../store/connection.js";
import { POSTGRES } from "../store/dialect.js";
import { WAKE_CHANNEL } from "../store/postgres/postgres-writes.js";
import { RUN_SELECT } from "../store/statements.js";
import { decideBatch, ENQUEUE_HOLDER_KEY, QUEUE_LOCK_KEY, runReadySql, type BatchPolicy } from "./dispatch-sql.js";
import { DISPATCHED_WAKE_PREFIX, MAX_WAKE_PAYLOAD } from "./wake-payloads.js";

/**
 * PostgreSQL: a queue's dispatch pass in one round trip, for the built-in policies. A pass was a
 * look at every queue, then a transaction of five statements (BEGIN, renew the dispatcher's row,
 * lock the queue, decide, COMMIT); a woken executor spent most of an enqueue's latency there, and
 * every executor woken by the same NOTIFY queued on the lock to commit a write for nothing. This
 * function does the same inside the database, in the one transaction of its call:
 *
 * 1. No run of the queue ready now: return (nothing locked, nothing written).
 * 2. The queue's advisory lock, tried (QUEUE_LOCK_KEY). Held, another dispatcher is deciding this
 *    queue at this moment: return without waiting. The holder decides what was ready when its
 *    statement began. What committed after is not left behind when the holder is an executor:
 *    every dispatcher hears every wake-up (NOTIFY) and passes again after one that came during
 *    its pass (Executor.poke). An enqueue holding the lock (enqueue-function.ts) hears nothing:
 *    a run committed between its last look and its commit would wait for the next poll, its
 *    wake-up having bounced off the lock. So an enqueue takes ENQUEUE_HOLDER_KEY before the
 *    queue's lock, and a dispatcher that finds the queue's lock held tries that key, shared: held,
 *    the holder may be an enqueue, and the call says so (`busy`): the executor passes again
 *    shortly (Executor: CONTENDED_RETRY_MS). Passes that bounce off a dispatcher retry nothing
 *    (a drain of 3,000 runs by 4 executors made 4× the dispatch calls when every bounce retried).
 *    Waiting for the lock instead would queue every woken executor on it.
 * 3. The decisions, taken and recorded as by `decideBatch`. A VOLATILE function's statements each
 *    read a fresh snapshot, so this one sees every dispatch that committed before the lock was
 *    ours (a single statement that locked and decided would read the world of before the wait).
 * 4. If anything was decided: the dispatcher's row is renewed — the claim's fencing. Gone (peers
 *    presumed it dead and removed it), the call raises SQLSTATE `CRFEN` and its transaction,
 *    decisions included, rolls back. NOTIFY when a peer got a run (delivered at commit), naming
 *    the executor that got runs (wake-payloads.ts), on that executor's own channel
 *    (`cairn_executor_queues.wake_channel`): the others have nothing to do, and are not woken to
 *    find that out. Executors without a channel of their own (an older Cairn's) hear of it on the
 *    shared channel, named together in one payload.
 *
 * A run the dispatcher gave itself comes back with its row as `getRun` reads it (`run_row`, as
 * JSON) and whether it has a journal (`has_steps`: a fresh run has none, a resumed one may): the
 * dispatcher starts it without reading it again, a round trip less between a wake-up and the run's
 * first line.
 *
 * With no dispatcher ($3 NULL: an enqueue deciding its own run, see enqueue-function.ts) every
 * decision is a peer's — woken by NOTIFY, no row returned with it — and there is no row of the
 * caller's to renew: the decisions go, as any peer's dispatch does, only to executors whose
 * heartbeat is within the lease.
 *
 * Every return also gives the queue's next delayed start (a row with `run_id` NULL and `delayed`
 * set), for the dispatcher's wake-up timer, and whether a ready run met the lock held by what may
 * be an enqueue (`busy`, on the same row). Parameters: $1 queue, $2 now, $3 the dispatcher, $4 the
 * oldest live heartbeat, $5 the policy's name, $6 the most decisions to make. Columns: run_id,
 * executor_id, again (as decideBatch), delayed, run_row, has_steps, busy.
 *
 * The function's name carries a hash of its text: a Cairn whose dispatch SQL differs (another
 * version) creates and calls its own beside the older one's, never replacing it under a running peer.
 */
/** A PL/pgSQL function of Cairn's: its name (with the hash of its text), its CREATE, and how to call it. */
export interface StoredFunction {
  name: string;
  create: string;
  call: Statement;
}

/**
 * The settings Cairn's functions run under (their CREATE's `SET` clause; part of the hash in their
 * names, so a database holding a function created without them gets one created with them).
 *
 * `plan_cache_mode = force_generic_plan`: PL/pgSQL prepares each statement of a function once per
 * session, but under the default (`auto`) PostgreSQL plans it again for every call's parameter
 * values as long as it estimates such a custom plan cheaper than a generic one — which it always
 * did for the dispatch statement (a dozen CTEs): 1.8–2.2 ms of planning a call, for an execution
 * of 0.15–0.6 ms, in every enqueue and every dispatch pass. The generic plan, planned once, ran
 * as fast as the custom ones in every shape measured (EXPLAIN ANALYZE of `decideBatch`: an empty
 * queue; 10,000 queued runs under FIFO and least-loaded; 50 and 20 partition keys, locality).
 *
 * `enable_seqscan = off`: that one plan is made at a session's first call, with the statistics of
 * that moment — in a new database, tables never analyzed, which the planner takes for a row or
 * two, and whose guess hangs on the rows' widths. With one column more on the Task table than
 * today it read the queue's live runs (`active`) as a scan of `cairn_runs` for every dispatched
 * Task row: kept for the session's life, an enqueue cost 10 ms after 600 runs and 250 ms after
 * 2,000 (quadratic; bench:queues, a producer whose first enqueues met empty tables). Every
 * statement here is written for its indexes (live runs by status, rows by primary key, waiting
 * runs by the queue's partial indexes), so plans that may not scan a whole table are the plans
 * meant, whatever the statistics say; a table with no usable index is still scanned.
 */
export const FUNCTION_SETTINGS = "SET plan_cache_mode = force_generic_plan SET enable_seqscan = off";

/** The name of a function of Cairn's: `prefix` and a hash of everything that defines it. */
export function functionName(prefix: string, body: string): string {
  return `${prefix}_${createHash("sha256").update(`${FUNCTION_SETTINGS}\n${body}`).digest("hex").slice(0, 16)}`;
}

/** The SQLSTATE of a dispatch whose dispatcher's row is gone (its decisions rolled back). */
export const FENCED_SQLSTATE = "CRFEN";

export function dispatchFunction(policy: BatchPolicy, policySql: string): StoredFunction {
  const d = POSTGRES;
  const decide = decideBatch(d, policy, policySql).text;
  const delayed = `SELECT MIN(t.not_before) FROM cairn_queue_runs t WHERE t.queue = $1 AND t.dispatched_at IS NULL AND t.not_before > $2`;
  const body = `
#variable_conflict use_column
DECLARE
  d record;
  decided boolean := false;
  woken text[] := '{}';
  shared text[] := '{}';
  w text;
  ch text;
  wake text;
BEGIN
  run_id := NULL;
  executor_id := NULL;
  again := 0;
  busy := false;
  IF ${runReadySql(d, "$1")} THEN
    IF pg_try_advisory_xact_lock(${QUEUE_LOCK_KEY}, hashtext($1)) THEN
      FOR d IN ${decide} LOOP
        run_id := d.run_id;
        executor_id := d.executor_id;
        again := d.again;
        decided := true;
        IF $3 IS NULL OR d.executor_id <> $3 THEN
          IF NOT d.executor_id = ANY(woken) THEN woken := woken || d.executor_id; END IF;
          run_row := NULL;
          has_steps := NULL;
        ELSE
          run_row := (SELECT to_jsonb(x) FROM (${RUN_SELECT} WHERE r.id = d.run_id) x);
          has_steps := EXISTS (SELECT 1 FROM cairn_steps s WHERE s.run_id = d.run_id);
        END IF;
        RETURN NEXT;
      END LOOP;
      IF decided AND $3 IS NOT NULL THEN
        UPDATE cairn_executors SET heartbeat_at = GREATEST(heartbeat_at, $2) WHERE id = $3;
        IF NOT FOUND THEN
          RAISE EXCEPTION 'cairn: executor % is gone (presumed dead by a peer): its dispatch of queue % is rolled back', $3, $1
            USING ERRCODE = '${FENCED_SQLSTATE}';
        END IF;
      END IF;
      -- Each executor given runs hears it on its own channel; those without one, on the shared channel together.
      FOREACH w IN ARRAY woken LOOP
        ch := (SELECT eq.wake_channel FROM cairn_executor_queues eq WHERE eq.executor_id = w AND eq.queue = $1);
        IF ch IS NULL THEN
          shared := shared || w;
        ELSE
          PERFORM pg_notify(ch, '${DISPATCHED_WAKE_PREFIX}' || w);
        END IF;
      END LOOP;
      IF cardinality(shared) > 0 THEN
        wake := '${DISPATCHED_WAKE_PREFIX}' || array_to_string(shared, ',');
        PERFORM pg_notify('${WAKE_CHANNEL}', CASE WHEN length(wake) <= ${MAX_WAKE_PAYLOAD} THEN wake ELSE '' END);
      END IF;
    ELSE
      busy := NOT pg_try_advisory_xact_lock_shared(${ENQUEUE_HOLDER_KEY}, hashtext($1));
    END IF;
  END IF;
  run_id := NULL;
  executor_id := NULL;
  again := 0;
  run_row := NULL;
  has_steps := NULL;
  delayed := (${delayed});
  IF delayed IS NOT NULL OR busy THEN RETURN NEXT; END IF;
END`;
  const name = functionName("cairn_dispatch", body);
  const create = `CREATE OR REPLACE FUNCTION ${name}(text, bigint, text, bigint, text, bigint)
RETURNS TABLE (run_id text, executor_id text, again integer, delayed bigint, run_row jsonb, has_steps boolean, busy boolean)
LANGUAGE plpgsql VOLATILE ${FUNCTION_SETTINGS} AS $cairn_fn$${body}$cairn_fn$`;
  return {
    name,
    create,
    call: { name: `${name}_call`, text: `SELECT run_id, executor_id, again, delayed, run_row, has_steps, busy FROM ${name}($1, $2, $3, $4, $5, $6)` },
  };
}

/**
 * Creates a dispatch function unless it exists, as one statement: concurrent creators (executors
 * launching together) take turns on an advisory lock, and the second finds the function there.
 */
export function ensureFunctionSql(fn: StoredFunction): Statement {
  return {
    text: `DO $cairn_do$ BEGIN
  PERFORM pg_advisory_xact_lock(${QUEUE_LOCK_KEY}, 0);
  IF to_regproc('${fn.name}') IS NULL THEN EXECUTE $cairn_create$${fn.create}$cairn_create$; END IF;
END $cairn_do$`,
  };
}

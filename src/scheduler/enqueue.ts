import { InvalidSpecError } from "../errors.js";
import { validateName } from "../engine/names.js";
import { isConstraintError } from "../store/store-errors.js";
import type { Statement } from "../store/connection.js";
import { WAKE_CHANNEL } from "../store/postgres/postgres-writes.js";
import { TERMINAL_STATUSES, type NewRun, type Store, type WriteOp } from "../store/store.js";
import type { QueueSpec } from "./queue-spec.js";
import { QUEUE_WAKE_PREFIX } from "./wake-payloads.js";
import { HELD_BY_QUEUES, HELD_UNLESS_STALE_ROW } from "./schema/queues-extension.js";
import type { EnqueueOptions } from "../engine/workflow.js";

/** How `workflow.enqueue(queue, input, options)` places a run on a queue (declared with the engine's Workflow). */
export type { EnqueueOptions };

export interface CheckedEnqueue {
  priority: number;
  dedupKey: string | null;
  notBefore: number | null;
  partitionKey: string | null;
  /** The caller named the run (`id`): a Task row of that id may be there already (HELD_UNLESS_STALE_ROW). */
  idGiven: boolean;
}

/** Refuses bad options before anything is stored, naming the field and the value. */
export function checkEnqueue(queue: QueueSpec, input: unknown, options: EnqueueOptions, now: number): CheckedEnqueue {
  if (options.priority !== undefined) {
    if (!Number.isSafeInteger(options.priority)) throw new InvalidSpecError("priority", options.priority, "must be an integer (lower runs first)");
    if (!queue.priority) {
      throw new InvalidSpecError("priority", options.priority, `queue "${queue.name}" was not declared with priority: true, so it would be ignored`);
    }
  }
  if (options.dedupKey !== undefined) validateName("dedupKey", options.dedupKey);
  if (options.delayMs !== undefined && options.runAt !== undefined) {
    throw new InvalidSpecError("delayMs", options.delayMs, "give delayMs or runAt, not both");
  }
  if (options.delayMs !== undefined && (!Number.isSafeInteger(options.delayMs) || options.delayMs < 0)) {
    throw new InvalidSpecError("delayMs", options.delayMs, "must be an integer number of milliseconds ≥ 0");
  }
  if (options.runAt !== undefined && !Number.isSafeInteger(options.runAt)) {
    throw new InvalidSpecError("runAt", options.runAt, "must be a time in milliseconds since the epoch (an integer)");
  }
  if (options.timeoutMs !== undefined && (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0)) {
    throw new InvalidSpecError("timeoutMs", options.timeoutMs, "must be a number of milliseconds > 0");
  }
  let partitionKey = options.partitionKey ?? null;
  if (partitionKey === null && queue.partitionKeyOf !== null) partitionKey = queue.partitionKeyOf(input);
  if (partitionKey !== null) validateName("partitionKey", partitionKey);
  return {
    priority: options.priority ?? 0,
    dedupKey: options.dedupKey ?? null,
    notBefore: options.delayMs !== undefined ? now + options.delayMs : (options.runAt ?? null),
    partitionKey,
    idGiven: options.id !== undefined,
  };
}

/**
 * PostgreSQL: the run and its Task row in ONE statement, committed on its own, instead of a
 * transaction of five round trips (BEGIN, the group commit's row locks, the run, the Task row,
 * COMMIT) — the start of every queued run's enqueue-to-start latency, and the NOTIFY only goes out
 * at the commit. The same rows as the commit below writes (an input small enough to be stored
 * inline: a larger one, or trace rows, take the commit), the same conflicts ignored, and the same
 * wake-up when the run is new: its payload names the queue, so an executor knows a dispatch is all
 * it asks for (wake-payloads.ts).
 */
const ENQUEUE_POSTGRES: Statement = {
  name: "cairn_queue_enqueue",
  text: `WITH i AS (
    INSERT INTO cairn_runs (id, workflow, status, input, input_hash, parent_id, parent_seq, root_id, app_version,
      executor_id, deadline_at, created_at, updated_at, forked_from, forked_from_seq, held_by)
    VALUES ($1, $2, $3, $4, NULL, $5, $6, $7, $8, $9, $10, $11, $11, $12, $13, ${HELD_UNLESS_STALE_ROW}) ON CONFLICT (id) DO NOTHING
    RETURNING status),
  t AS (
    INSERT INTO cairn_queue_runs (run_id, queue, partition_key, priority, dedup_key, not_before, enqueued_at)
    VALUES ($1, $14, $15, $16, $17, $18, $11) ON CONFLICT (run_id) DO NOTHING)
  SELECT pg_notify('${WAKE_CHANNEL}', '${QUEUE_WAKE_PREFIX}' || $14::text) FROM i WHERE status = 'enqueued'`,
};

function enqueueValues(queue: QueueSpec, run: NewRun, checked: CheckedEnqueue): unknown[] {
  return [
    run.id,
    run.workflow,
    run.status,
    run.input.text,
    run.parentId,
    run.parentSeq,
    run.rootId,
    run.appVersion,
    run.executorId,
    run.deadlineAt,
    run.createdAt,
    run.forkedFrom,
    run.forkedFromSeq,
    queue.name,
    checked.partitionKey,
    checked.priority,
    checked.dedupKey,
    checked.notBefore,
  ];
}

const DEDUP = `SELECT t.run_id, r.status FROM cairn_queue_runs t JOIN cairn_runs r ON r.id = t.run_id WHERE t.queue = $1 AND t.dedup_key = $2`;

/**
 * PostgreSQL, a built-in policy: enqueue through the queue's enqueue function, which dispatches
 * the run in the same call (enqueue-function.ts). `oldestHeartbeat`: now − the lease.
 */
export interface DispatchAtEnqueue {
  /** Null: this role may not create the function (the plain enqueue is used). */
  call: Promise<Statement | null>;
  oldestHeartbeat: number;
}

/** What an enqueue stored: the run the caller gets a handle on, and whether this call created it. */
export interface Enqueued {
  runId: string;
  /**
   * True when this call's insert created the run (so it is of the caller's workflow, nothing to
   * check); false when it may name a run that was there already (same id, or a live dedup key), or
   * when the backend's write does not say (the caller reads the row to find out).
   */
  created: boolean;
}

/**
 * Writes the run (status `enqueued`) and its Task row in one commit, and returns the id of the run
 * the caller gets a handle on: the new one, or the live run that already holds the dedup key.
 *
 * Failure semantics: the run and its queue entry commit together or not at all. Idempotent by id
 * (a second enqueue with the same id stores nothing), and by a live dedup key: two enqueues racing
 * with one key both return the run of whichever committed first (the unique index decides).
 *
 * `starting` gives rows to commit with the run (the caller's trace context, as `start()` keeps it):
 * asked for once, and only when this enqueue is about to store a run — a dedup hit that returns
 * the live run records no start of its own.
 */
export async function enqueueRun(
  store: Store,
  queue: QueueSpec,
  run: NewRun,
  checked: CheckedEnqueue,
  starting: () => WriteOp[] = () => [],
  dispatching?: DispatchAtEnqueue,
): Promise<Enqueued> {
  let startRows: WriteOp[] | undefined;
  for (let attempt = 0; ; attempt++) {
    if (checked.dedupKey !== null) {
      const [existing] = await store.select<{ run_id: string; status: string }>(DEDUP, [queue.name, checked.dedupKey]);
      if (existing !== undefined) {
        if (!TERMINAL_STATUSES.includes(existing.status as never)) return { runId: String(existing.run_id), created: false };
        // Its run finished: the key is free again. Cleared only while it still names that run.
        await store.commit(null, [
          { type: "update", table: "cairn_queue_runs", where: { run_id: existing.run_id, dedup_key: checked.dedupKey }, set: { dedup_key: null } },
        ]);
      }
    }
    startRows ??= starting();
    try {
      if (store.backend === "postgres" && run.input.hash === null && startRows.length === 0) {
        // Concurrent enqueues each on a pooled connection: on the layers' one held connection they
        // took turns (16 producers in flight: 787–869 → 266–364 enqueues/s).
        // The enqueue function, unless this role may not create it (null): the plain statement
        // does the same write, and the executors the dispatch.
        const call = dispatching === undefined ? null : await dispatching.call;
        if (call !== null) {
          const params = [...enqueueValues(queue, run, checked), dispatching?.oldestHeartbeat, queue.policy];
          const [row] = await store.execute<{ created: unknown }>(call, params, { concurrent: true });
          return { runId: run.id, created: row?.created === true };
        }
        // The statement returns a row exactly when its insert created the run (the NOTIFY's row).
        const inserted = await store.execute(ENQUEUE_POSTGRES, enqueueValues(queue, run, checked), { concurrent: true });
        return { runId: run.id, created: inserted.length > 0 };
      }
      // Marked as the queues' unless a Task row of its id is there already (HELD_UNLESS_STALE_ROW):
      // looked for only under an id the caller gave (none can be there under a new UUID).
      const heldBy = checked.idGiven
        ? ((await store.select<{ held_by: string | null }>(`SELECT ${HELD_UNLESS_STALE_ROW} AS held_by`, [run.id]))[0]?.held_by ?? null)
        : HELD_BY_QUEUES;
      await store.commit(null, [
        { type: "run", run: { ...run, heldBy } },
        {
          type: "insert",
          table: "cairn_queue_runs",
          values: {
            run_id: run.id,
            queue: queue.name,
            partition_key: checked.partitionKey,
            priority: checked.priority,
            dedup_key: checked.dedupKey,
            not_before: checked.notBefore,
            enqueued_at: run.createdAt,
          },
          onConflict: { keys: ["run_id"], action: "ignore" },
        },
        ...startRows,
      ]);
      return { runId: run.id, created: false };
    } catch (error) {
      // Another enqueue took the dedup key between our look and our insert: theirs is the run.
      if (checked.dedupKey === null || !isConstraintError(error) || attempt >= 2) throw error;
    }
  }
}

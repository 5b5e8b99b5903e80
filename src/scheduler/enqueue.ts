import { InvalidSpecError } from "../errors.js";
import { validateName } from "../engine/names.js";
import { isConstraintError } from "../store/store-errors.js";
import { TERMINAL_STATUSES, type NewRun, type Store, type WriteOp } from "../store/store.js";
import type { QueueSpec } from "./queue-spec.js";
import type { EnqueueOptions } from "../engine/workflow.js";

/** How `workflow.enqueue(queue, input, options)` places a run on a queue (declared with the engine's Workflow). */
export type { EnqueueOptions };

export interface CheckedEnqueue {
  priority: number;
  dedupKey: string | null;
  notBefore: number | null;
  partitionKey: string | null;
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
  };
}

const DEDUP = `SELECT t.run_id, r.status FROM cairn_queue_runs t JOIN cairn_runs r ON r.id = t.run_id WHERE t.queue = $1 AND t.dedup_key = $2`;

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
): Promise<string> {
  let startRows: WriteOp[] | undefined;
  for (let attempt = 0; ; attempt++) {
    if (checked.dedupKey !== null) {
      const [existing] = await store.select<{ run_id: string; status: string }>(DEDUP, [queue.name, checked.dedupKey]);
      if (existing !== undefined) {
        if (!TERMINAL_STATUSES.includes(existing.status as never)) return String(existing.run_id);
        // Its run finished: the key is free again. Cleared only while it still names that run.
        await store.commit(null, [
          { type: "update", table: "cairn_queue_runs", where: { run_id: existing.run_id, dedup_key: checked.dedupKey }, set: { dedup_key: null } },
        ]);
      }
    }
    startRows ??= starting();
    try {
      await store.commit(null, [
        { type: "run", run },
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
      return run.id;
    } catch (error) {
      // Another enqueue took the dedup key between our look and our insert: theirs is the run.
      if (checked.dedupKey === null || !isConstraintError(error) || attempt >= 2) throw error;
    }
  }
}

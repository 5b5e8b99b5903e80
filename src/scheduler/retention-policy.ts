import { InvalidSpecError } from "../errors.js";
import type { DeletedRuns, RunDeleteFilter } from "../store/retention.js";
import type { Store } from "../store/store.js";
import type { Clock } from "../engine/clock.js";
import { validateRunId } from "../engine/names.js";

/**
 * How long finished runs are kept (`new Cairn({ retention })`). Without it nothing is deleted.
 * Cancelled runs are kept as long as failed ones.
 */
export interface RetentionOptions {
  /** Delete a succeeded run (with its descendants) this long after it finished. */
  succeededAfterMs?: number;
  /** Delete a failed or cancelled run this long after it finished. */
  failedAfterMs?: number;
  /** Runs deleted per batch. Default 100: a batch is a short transaction that never stalls the executor. */
  batchSize?: number;
}

/** Between batches when the last found nothing to do; a full batch goes on at the next poll. */
const IDLE_INTERVAL_MS = 1000;

/**
 * Applies a retention policy in small batches from the executor's poll loop. Every executor sharing
 * the database may run it: on PostgreSQL concurrent batches take different runs (`SKIP LOCKED`), on
 * SQLite they take turns on the write lock.
 *
 * Failure semantics: each batch commits on its own — the runs' rows in one transaction, then the
 * payloads they alone named in another. A crash between the two leaves unreferenced payloads that
 * `cairn gc` (or a later batch naming the same hashes) collects; a crash inside either loses nothing
 * but the batch's progress. Never touches an unfinished run.
 */
export class RetentionPolicy {
  private running: Promise<void> | null = null;
  private nextAt = -Infinity;
  private stopped = false;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly options: RetentionOptions,
    private readonly onError: (error: unknown) => void,
  ) {
    for (const field of ["succeededAfterMs", "failedAfterMs"] as const) {
      const value = options[field];
      if (value !== undefined && (typeof value !== "number" || !Number.isFinite(value) || value < 0)) {
        throw new InvalidSpecError(`retention.${field}`, value, "must be a number of milliseconds ≥ 0");
      }
    }
    const batch = options.batchSize;
    if (batch !== undefined && (!Number.isInteger(batch) || batch < 1 || batch > 10_000)) {
      throw new InvalidSpecError("retention.batchSize", batch, "must be an integer from 1 to 10000");
    }
  }

  /** One batch, unless one is in flight or the last found nothing less than a second ago. */
  tick(): void {
    if (this.stopped || this.running !== null || Date.now() < this.nextAt) return;
    this.running = this.batch()
      .then((full) => {
        this.nextAt = full ? -Infinity : Date.now() + IDLE_INTERVAL_MS;
      })
      .catch((error: unknown) => {
        this.nextAt = Date.now() + IDLE_INTERVAL_MS;
        if (!this.stopped) this.onError(error);
      })
      .finally(() => (this.running = null));
  }

  /** Waits for the batch in flight (before the store closes). */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  /** True when a batch was full (there is probably more to delete). */
  private async batch(): Promise<boolean> {
    const limit = this.options.batchSize ?? 100;
    const now = this.clock.now();
    let full = false;
    if (this.options.succeededAfterMs !== undefined) {
      const done = await this.store.deleteRuns({ status: "succeeded", finishedBefore: now - this.options.succeededAfterMs, limit });
      full ||= done.runIds.length >= limit;
    }
    if (this.options.failedAfterMs !== undefined) {
      const done = await this.store.deleteRuns({ status: ["failed", "cancelled"], finishedBefore: now - this.options.failedAfterMs, limit });
      full ||= done.runIds.length >= limit;
    }
    return full;
  }
}

/** `cairn.runs.delete(filter)`: the filter checked (names and ids by the usual rules) before the store sees it. */
export async function deleteRuns(store: Store, filter: RunDeleteFilter): Promise<DeletedRuns> {
  if (filter === null || typeof filter !== "object") throw new InvalidSpecError("filter", filter, "runs.delete needs a filter object");
  for (const id of filter.ids ?? []) validateRunId(id, "runId");
  if (filter.workflow !== undefined) validateRunId(filter.workflow, "workflow name");
  return store.deleteRuns(filter);
}

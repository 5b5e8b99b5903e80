import type { DurabilityWatermark } from "./store.js";

/**
 * The group commit's bookkeeping for external synchrony (`CommitOptions.deferDurability`), the same
 * on both backends. A flush takes `batchStarts()` before it writes: every deferred commit counted
 * by then resolved before this batch began, so a barrier in this batch, once committed and flushed,
 * covers them all (one WAL, written in order).
 */
export class Durability implements DurabilityWatermark {
  deferred = 0;
  durable = 0;

  /** Deferred commits resolved so far: what a barrier committed in the batch about to run covers. */
  batchStarts(): number {
    return this.deferred;
  }

  /** After a flush: `deferredCommits` resolved without an fsync; a barrier that committed moves `durable` to `covers`. */
  batchEnded(covers: number, deferredCommits: number, barrierCommitted: boolean): void {
    if (barrierCommitted && covers > this.durable) this.durable = covers;
    this.deferred += deferredCommits;
  }
}

/** Whether the commit's ops hold a barrier. */
export function hasBarrier(ops: readonly { type: string }[]): boolean {
  for (const op of ops) if (op.type === "barrier") return true;
  return false;
}

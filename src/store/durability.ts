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

  /**
   * After a flush: its commits that went through (`outcomes[i] === null`) resolved without an fsync
   * if the batch was `deferred`; otherwise a barrier among them moves `durable` to `covers`.
   */
  batchSettled(commits: readonly { ops: readonly { type: string }[] }[], outcomes: readonly unknown[], covers: number, deferred: boolean): void {
    let committed = 0;
    let barrier = false;
    commits.forEach((commit, i) => {
      if (outcomes[i] !== null) return;
      committed++;
      if (!deferred && hasBarrier(commit.ops)) barrier = true;
    });
    if (barrier && covers > this.durable) this.durable = covers;
    if (deferred) this.deferred += committed;
  }
}

/** Whether the commit's ops hold a barrier. */
function hasBarrier(ops: readonly { type: string }[]): boolean {
  for (const op of ops) if (op.type === "barrier") return true;
  return false;
}

import type { CommitOptions, DurabilityWatermark } from "./store.js";

/**
 * How a commit waits for durability: "wait" for its fsync or WAL flush (the default); "counted"
 * (`CommitOptions.deferDurability`) resolves without and is counted in the watermark; "uncounted"
 * (with `rederivable` too) resolves without and is not, since its loss costs only a replay.
 */
export type Deferral = "wait" | "counted" | "uncounted";

export function deferralOf(options: CommitOptions | undefined): Deferral {
  if (options?.deferDurability !== true) return "wait";
  return options.rederivable === true ? "uncounted" : "counted";
}

/** Whether a batch may commit without waiting for durability: every commit in it may. */
export function batchDefers(batch: readonly { defer: Deferral }[]): boolean {
  for (const pending of batch) if (pending.defer === "wait") return false;
  return true;
}

/**
 * The group commit's bookkeeping for external synchrony (`CommitOptions.deferDurability`), the same
 * on both backends. A flush takes `batchStarts()` before it writes: every deferred commit counted
 * by then resolved before this batch began, so a barrier in this batch, once committed and flushed,
 * covers them all (one WAL, written in order).
 */
export class Durability implements DurabilityWatermark {
  deferred = 0;
  durable = 0;
  rederivable = 0;

  /** Deferred commits resolved so far: what a barrier committed in the batch about to run covers. */
  batchStarts(): number {
    return this.deferred;
  }

  /**
   * After a flush: its commits that went through (`outcomes[i] === null`) resolved without an fsync
   * if the batch was `deferred` (the "counted" ones are counted); otherwise a barrier among them
   * moves `durable` to `covers`.
   */
  batchSettled(
    commits: readonly { ops: readonly { type: string }[]; defer: Deferral }[],
    outcomes: readonly unknown[],
    covers: number,
    deferred: boolean,
  ): void {
    let committed = 0;
    let barrier = false;
    commits.forEach((commit, i) => {
      if (outcomes[i] !== null) return;
      if (commit.defer === "counted") committed++;
      else if (deferred && commit.defer === "uncounted") this.rederivable++;
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

import type { Cairn } from "../../src/index.js";

/** One run's work as it happened: which executor did it, when it began and ended (real ms). */
export interface LedgerEntry {
  runId: string;
  executor: string;
  key: string | null;
  start: number;
  end: number;
}

/**
 * The ledger the limit tests check: each run's step writes its start and end, so the most runs at
 * work at once — overall, per executor, per key — can be counted after the fact. A step's work lies
 * inside its run's dispatch-to-finish interval, so the ledger never shows more at once than the
 * queue held; a limit the queue broke shows up here whenever the overlapping runs did work.
 */
export class Ledger {
  readonly entries: LedgerEntry[] = [];

  /** Registers workflow `name` on `cairn`: it works `workMs` inside a step, recorded under `executor`. */
  workflow(cairn: Cairn, name: string, executor: string, workMs: number) {
    return cairn.workflow(name, async (ctx, input: { key?: string } | undefined) =>
      ctx.step("work", async () => {
        const start = Date.now();
        await new Promise((resolve) => setTimeout(resolve, workMs));
        this.entries.push({ runId: ctx.runId, executor, key: input?.key ?? null, start, end: Date.now() });
        return executor;
      }),
    );
  }

  /** The most entries (matching `filter`) whose [start, end) intervals overlap at one instant. */
  maxOverlap(filter: (entry: LedgerEntry) => boolean = () => true): number {
    const events = this.entries.filter(filter).flatMap((e) => [
      { t: e.start, d: 1 },
      { t: e.end, d: -1 },
    ]);
    // An end at the same instant as a start frees its slot first.
    events.sort((a, b) => a.t - b.t || a.d - b.d);
    let now = 0;
    let max = 0;
    for (const event of events) max = Math.max(max, (now += event.d));
    return max;
  }
}

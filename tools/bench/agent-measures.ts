import { statSync } from "node:fs";
import { PerformanceObserver } from "node:perf_hooks";
import type Database from "better-sqlite3";

/** What the agent-storage bench reads off each arm: checkpoint time, bytes written, file size. */

export type Synchronous = "FULL" | "NORMAL" | "OFF";

/** From one `performance.now()` to another. */
export type Span = [number, number];

/**
 * An arm's checkpoint time: the spans spent checkpointing, summed by turn, and the V8
 * garbage-collection pauses that fell inside them. V8 runs a scavenge as a task wherever the
 * event loop next yields, so one library's spans can absorb the collection of another's garbage
 * (here, what the AI SDK allocates re-validating the whole prompt on every call tends to be
 * collected in Cairn's group-commit hop); the share is reported, not removed.
 */
export class CheckpointTimer {
  private readonly spans: Span[] = [];
  private readonly pauses: Span[] = [];
  private readonly perTurnMs: number[] = [];
  private turnMs = 0;
  private count = 0;
  private readonly observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) this.pauses.push([entry.startTime, entry.startTime + entry.duration]);
  });

  constructor() {
    this.observer.observe({ entryTypes: ["gc"] });
  }

  /** A checkpoint from `start` to `end`, less `excluded` inside it (the mock's answer, the tool's run). */
  add(start: number, end: number, excluded?: Span): void {
    this.count++;
    const parts: Span[] =
      excluded === undefined
        ? [[start, end]]
        : [
            [start, excluded[0]],
            [excluded[1], end],
          ];
    for (const part of parts) {
      this.spans.push(part);
      this.turnMs += part[1] - part[0];
    }
  }

  endTurn(): void {
    this.perTurnMs.push(this.turnMs);
    this.turnMs = 0;
  }

  async stop(): Promise<{ checkpointMs: number; checkpointMsPerTurn: number[]; checkpoints: number; gcMs: number }> {
    await new Promise((resolve) => setTimeout(resolve, 10)); // GC entries arrive asynchronously
    this.observer.disconnect();
    let gcMs = 0;
    for (const [p0, p1] of this.pauses) for (const [s0, s1] of this.spans) gcMs += Math.max(0, Math.min(p1, s1) - Math.max(p0, s0));
    return { checkpointMs: sum(this.perTurnMs), checkpointMsPerTurn: this.perTurnMs, checkpoints: this.count, gcMs };
  }
}

export function columnBytes(db: Database.Database, tables: Record<string, string[]>): { total: number; byColumn: Record<string, number> } {
  const byColumn: Record<string, number> = {};
  let total = 0;
  for (const [table, columns] of Object.entries(tables)) {
    const select = columns.map((c) => `COALESCE(sum(length(CAST(${c} AS BLOB))), 0) AS "${c}"`).join(", ");
    const row = db.prepare(`SELECT ${select} FROM ${table}`).get() as Record<string, number>;
    for (const column of columns) {
      const bytes = Number(row[column]);
      byColumn[`${table}.${column}`] = bytes;
      total += bytes;
    }
  }
  return { total, byColumn };
}

/** The file's size once the WAL has been copied back into it and truncated. */
export function checkpointedSize(db: Database.Database, path: string): number {
  db.pragma("wal_checkpoint(TRUNCATE)");
  return statSync(path).size;
}

export function synchronousOf(db: Database.Database): Synchronous {
  const level = Number(db.pragma("synchronous", { simple: true }));
  return level >= 2 ? "FULL" : level === 1 ? "NORMAL" : "OFF";
}

export function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

import type { RunStatus, Store } from "../../store/store.js";
import { TERMINAL_STATUSES } from "../../store/store.js";

/** A model call or tool call the journal has recorded (a row of `cairn_trajectory`). */
export interface TrajectoryEntry {
  runId: string;
  seq: number;
  kind: "model" | "tool";
  /** The model id, or the tool's name. */
  name: string;
  /** The model's response (tool calls in brackets), or the tool's output; excerpts. */
  detail: string | null;
}

const POLL_INTERVAL_MS = 20;

/**
 * The demo's view of the database: polls the tickets' runs and their trajectory, hands each newly
 * recorded model call or tool call to `onEntry` (once, in the order recorded), and resolves the
 * conditions the demo waits on. What it reports is what is committed — what a crash cannot undo.
 */
export class JournalWatch {
  readonly entries: TrajectoryEntry[] = [];
  readonly statuses = new Map<string, RunStatus>();
  private readonly seen = new Set<string>();
  /** The pending `until`s: each evaluates its condition, or is cancelled by `stop`. */
  private readonly checks = new Map<() => void, () => void>();
  private polling: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private failure: unknown;

  constructor(
    private readonly store: Store,
    private readonly runIds: readonly string[],
    private readonly onEntry: (entry: TrajectoryEntry) => void,
  ) {}

  /** Polls every 20 ms until `stop`. */
  start(): void {
    const tick = (): void => {
      if (!this.stopped) this.timer = setTimeout(() => void this.poll().then(tick), POLL_INTERVAL_MS);
    };
    tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.polling;
    for (const cancel of [...this.checks.values()]) cancel();
  }

  /** Reads the database now (after a kill: what the dead worker committed is all it ever will). */
  poll(): Promise<void> {
    this.polling = this.polling.then(() => this.read());
    return this.polling;
  }

  /** Model calls recorded so far. */
  get modelCalls(): number {
    return this.entries.filter((e) => e.kind === "model").length;
  }

  ended(runId: string): boolean {
    const status = this.statuses.get(runId);
    return status !== undefined && TERMINAL_STATUSES.includes(status);
  }

  /** Resolves with the first value `check` returns other than undefined, checked after every poll. */
  until<T>(what: string, timeoutMs: number, check: () => T | undefined): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const settle = (): void => {
        this.checks.delete(evaluate);
        clearTimeout(timer);
      };
      const evaluate = (): void => {
        if (this.failure !== undefined) {
          settle();
          reject(this.failure instanceof Error ? this.failure : new Error(String(this.failure)));
          return;
        }
        const value = check();
        if (value === undefined) return;
        settle();
        resolve(value);
      };
      const timer = setTimeout(() => {
        settle();
        reject(new Error(`waited ${timeoutMs} ms for ${what}`));
      }, timeoutMs);
      this.checks.set(evaluate, () => {
        settle();
        reject(new Error(`stopped watching before ${what}`));
      });
      evaluate();
    });
  }

  private async read(): Promise<void> {
    try {
      const ids = this.runIds.map((_, i) => `$${i + 1}`).join(", ");
      const runs = await this.store.select<{ id: string; status: RunStatus }>(`SELECT id, status FROM cairn_runs WHERE id IN (${ids})`, [...this.runIds]);
      const rows = await this.store.select<{ run_id: string; seq: number; kind: "model" | "tool"; name: string; detail: string | null }>(
        `SELECT run_id, seq, kind, name, detail FROM cairn_trajectory WHERE run_id IN (${ids}) ORDER BY created_at, run_id, seq`,
        [...this.runIds],
      );
      for (const row of rows) {
        const key = `${row.run_id}:${row.seq}`;
        if (this.seen.has(key)) continue;
        this.seen.add(key);
        const entry = { runId: row.run_id, seq: Number(row.seq), kind: row.kind, name: row.name, detail: row.detail };
        this.entries.push(entry);
        this.onEntry(entry);
      }
      for (const run of runs) this.statuses.set(run.id, run.status);
    } catch (error) {
      this.failure = error;
    }
    for (const check of [...this.checks.keys()]) check();
  }
}

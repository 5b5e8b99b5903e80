import { TERMINAL_STATUSES, type RunRow } from "../store/store.js";

/** How often runs awaited here are looked up in the database (runs settled elsewhere are found so). */
const POLL_MS = 100;
/** The most run ids one lookup names. */
const CHUNK = 500;

type Wake = (settled?: RunRow) => void;

/**
 * Everyone in this process waiting for a run to end (`handle.result()`), served by ONE lookup of
 * every awaited run per interval. A run that settles in this process wakes its waiters at once
 * through the executor (`onRunChange`); one that settles in another process is found here. A poll
 * per waiter made 2,000 waiting handles 20,000 reads a second on PostgreSQL: they filled the
 * connection pool, and the executor's own commits and claims waited behind them until runs
 * stopped finishing at all.
 *
 * A lookup that fails (a database outage) is simply tried again at the next interval: a caller
 * waiting for the end does not hear of an outage the run itself survives.
 */
export class RunWaiters {
  private readonly waiting = new Map<string, Set<Wake>>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly lookUp: (ids: string[]) => Promise<RunRow[]>) {}

  /**
   * Calls `wake(row)` once a lookup finds the run ended, or `wake()` if it finds no such run
   * (deleted). Returns the unsubscribe.
   */
  watch(runId: string, wake: Wake): () => void {
    let set = this.waiting.get(runId);
    if (set === undefined) this.waiting.set(runId, (set = new Set()));
    set.add(wake);
    this.schedule();
    return () => {
      set.delete(wake);
      if (set.size === 0 && this.waiting.get(runId) === set) this.waiting.delete(runId);
    };
  }

  /** Stops looking (shutdown), and wakes every waiter to read the run once more (which then fails: the store is closed). */
  close(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    for (const wakes of [...this.waiting.values()]) for (const wake of [...wakes]) wake();
    this.waiting.clear();
  }

  private closed = false;

  private schedule(): void {
    if (this.closed || this.timer !== null || this.waiting.size === 0) return;
    this.timer = setTimeout(() => void this.lookUpAll(), POLL_MS);
  }

  private async lookUpAll(): Promise<void> {
    const ids = [...this.waiting.keys()];
    try {
      for (let i = 0; i < ids.length; i += CHUNK) {
        const chunk = ids.slice(i, i + CHUNK);
        const rows = new Map((await this.lookUp(chunk)).map((row) => [row.id, row]));
        for (const id of chunk) {
          const row = rows.get(id);
          if (row !== undefined && !TERMINAL_STATUSES.includes(row.status)) continue;
          for (const wake of [...(this.waiting.get(id) ?? [])]) wake(row);
        }
      }
    } catch {
      // Tried again at the next interval (see the class comment).
    } finally {
      this.timer = null;
      this.schedule();
    }
  }
}

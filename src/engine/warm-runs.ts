import type { RunRow, Store } from "../store/store.js";
import { setLongTimeoutAt, type LongTimeout } from "./long-timeout.js";
import { JournalChecks } from "./journal-checks.js";
import type { RunExecution } from "./run-execution.js";

/** How many unloaded runs an executor keeps in memory by default (CairnOptions.warmRuns). */
export const DEFAULT_WARM_RUNS = 100;

/**
 * Warm runs (Temporal's "sticky" workflows): a bounded cache of the executions this executor
 * unloaded while they wait — a sleep, a receive, a select, a child's result — so that when the run
 * is claimed here again it continues from memory instead of replaying its journal from the top.
 * A run that sleeps 500 times then costs one replay of nothing, not 500 replays of a growing
 * journal.
 *
 * A warm continuation must be exactly what a replay would rebuild. A replay's state is a function
 * of the code, the run's row and its journal; the code is this process's, so the parked execution
 * may continue only when all of these hold (else it is dropped and the run replays, as it always
 * did):
 *
 * - it was parked by this executor's current incarnation (its fence names the current id; a
 *   re-registration clears the cache), and claimed back by that same executor;
 * - nothing looked at it while parked: an operation the workflow called meanwhile (after a timer of
 *   its own), or the workflow's end, was turned away as in any unloaded run, and only a replay calls
 *   it again (RunLifecycle.stopped marks the execution disturbed);
 * - the run's row is the one it was loaded with (id, workflow, input, creation time, parent, fork
 *   origin, version, deadline, recoveries and their base: a takeover, a resume that reset the
 *   deadline or the recovery base, a run deleted and created again under the same id differ);
 * - its journal is the one it knows (journal-watch.ts): no row above the highest seq it took, no
 *   row where it has none, and the rows that could change — the waits' rows, the failed rows a
 *   `resume` would delete — as they were. Any execution elsewhere that moved the run on changed one
 *   of those; one that woke and waited again without moving it left the journal as it was, and a
 *   replay of it is this execution. The check reads those few rows by primary key: its cost does
 *   not grow with the journal.
 *
 * In this process, `cancel` and `resume` drop the run from the cache at once (a fork is a new run:
 * it is never in the cache). A cancel and resume done elsewhere that left both the row and the
 * journal as they were (nothing failed to delete, no deadline, no recoveries) leave nothing a
 * replay would read differently: the workflow, replayed, reaches this very state.
 *
 * What it costs: a parked run keeps what it held while loaded — the journal rows it was loaded
 * with (none for a run that has only run here), the workflow's own variables, and a little
 * bookkeeping per durable wait. Evicted runs (least recently parked first, past `maxRuns`) cost
 * nothing, as every waiting run did before; with `maxRuns: 0` nothing is kept.
 */
export class WarmRuns {
  /** Parked executions, least recently parked first. */
  private readonly parked = new Map<string, RunExecution>();
  /**
   * A timer per parked execution whose wait ends by time, poking its executor then. The executor
   * has one timer of its own, armed at the earliest wake-up it knows of; after it fires, it reads
   * the next from the database, which on PostgreSQL shows only the first few wake-ups of its
   * version (PostgresStore.nextWakeAt) — a run parked here may fall due behind many of its peers'
   * runs, and without its own timer would be claimed late (by up to the grace, statements.ts
   * ParkerFirst), possibly by a peer that replays it.
   */
  private readonly timers = new Map<string, LongTimeout>();

  /** The checks of the runs claimed back, read together (journal-checks.ts). */
  private readonly checks: JournalChecks;

  constructor(
    readonly maxRuns: number,
    store: Store,
  ) {
    this.checks = new JournalChecks(store);
  }

  get size(): number {
    return this.parked.size;
  }

  /**
   * An execution that just unloaded: kept if `keep` (its executor's current incarnation parked it)
   * and it may continue warm; the oldest are evicted past the bound. One not kept lets go of its
   * waits, so that nothing of it stays reachable.
   */
  park(execution: RunExecution, keep: boolean): void {
    if (!keep || this.maxRuns === 0 || !execution.parked) return execution.dropWaits();
    this.forget(execution.runId);
    this.parked.set(execution.runId, execution);
    const wakesAt = execution.wakesAt;
    if (wakesAt !== null) {
      const timer = setLongTimeoutAt(
        () => execution.host.poke(),
        wakesAt,
        () => execution.clock.now(),
        { unref: true },
      );
      this.timers.set(execution.runId, timer);
    }
    for (const [runId, oldest] of this.parked) {
      if (this.parked.size <= this.maxRuns) break;
      this.remove(runId);
      oldest.dropWaits();
    }
  }

  /** Drops the run's parked execution (it is loaded afresh, cancelled, resumed ...). */
  forget(runId: string): void {
    this.parked.get(runId)?.dropWaits();
    this.remove(runId);
  }

  /** Out of the cache, its timer with it. */
  private remove(runId: string): void {
    this.parked.delete(runId);
    this.timers.get(runId)?.clear();
    this.timers.delete(runId);
  }

  /** Whether an execution of the run is parked here (then `take` decides whether it continues). */
  holds(runId: string): boolean {
    return this.parked.has(runId);
  }

  clear(): void {
    for (const execution of this.parked.values()) execution.dropWaits();
    this.parked.clear();
    for (const timer of this.timers.values()) timer.clear();
    this.timers.clear();
  }

  /**
   * The parked execution of `run` — just claimed by `executorId` — if it may continue warm (see
   * above); it leaves the cache either way. Undefined: replay.
   */
  async take(run: RunRow, executorId: string): Promise<RunExecution | undefined> {
    const execution = this.parked.get(run.id);
    if (execution === undefined) return undefined;
    this.remove(run.id);
    const warm = await this.mayContinue(execution, run, executorId);
    if (!warm) execution.dropWaits();
    return warm ? execution : undefined;
  }

  private async mayContinue(execution: RunExecution, run: RunRow, executorId: string): Promise<boolean> {
    if (!execution.parked || execution.fence.executorId !== executorId || !sameRun(execution.info, run)) return false;
    const expected = execution.watch.expectation();
    if (expected === null) return false;
    try {
      return (await this.checks.unchanged(run.id, expected)) && execution.parked;
    } catch {
      return false; // the replay's own reads meet the store's trouble, and handle it
    }
  }
}

/** The fields of a run's row an execution reads (or that change only when someone else acted on the run). */
function sameRun(known: Readonly<RunRow>, claimed: RunRow): boolean {
  return (
    known.id === claimed.id &&
    known.workflow === claimed.workflow &&
    known.createdAt === claimed.createdAt &&
    known.input === claimed.input &&
    known.parentId === claimed.parentId &&
    known.parentSeq === claimed.parentSeq &&
    known.rootId === claimed.rootId &&
    known.appVersion === claimed.appVersion &&
    known.deadlineAt === claimed.deadlineAt &&
    known.forkedFrom === claimed.forkedFrom &&
    known.forkedFromSeq === claimed.forkedFromSeq &&
    known.recoveries === claimed.recoveries &&
    known.recoveryBase === claimed.recoveryBase
  );
}

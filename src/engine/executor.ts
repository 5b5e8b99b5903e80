import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { CairnError } from "../errors.js";
import type { ExecutorRow, RunRow, Store } from "../store/store.js";
import type { Clock } from "./clock.js";
import { RunExecution, type ExecutionHost, type WorkflowFunction } from "./run-execution.js";
import { errorText } from "./values.js";

export interface ExecutorOptions {
  appVersion: string;
  /** Claim runs of every application version, not just this one's. */
  recoverAllVersions: boolean;
  /** How long an executor may go without a heartbeat before its runs are taken over. */
  leaseMs: number;
  /** How often to look for claimable runs written by other processes. */
  pollIntervalMs: number;
  maxConcurrentRuns: number;
  /** Called with errors the executor cannot hand to anyone (a failed poll, a store outage). */
  onError: (error: unknown) => void;
  /** Housekeeping run on every poll while the executor runs (the retention policy's batches). */
  maintenance?: () => void;
}

/**
 * A process that runs runs: a row in `cairn_executors`, renewed by heartbeat, that owns the runs
 * whose `executor_id` names it. It claims enqueued runs, runs whose timers fell due, runs woken by
 * a message or a child, and the runs of dead executors.
 *
 * An executor is dead when its heartbeat is older than the lease, or — at once, without waiting
 * for the lease — when the death is observable: an executor on this host whose pid is gone, or
 * (PostgreSQL) one whose database session has closed. That is why restarting a killed process
 * resumes its runs immediately. Fencing (see Store) keeps a presumed-dead owner that is in fact
 * alive from committing into a run it lost.
 */
export class Executor implements ExecutionHost {
  readonly executorId = randomUUID();
  private readonly executions = new Map<string, RunExecution>();
  private readonly listeners = new Map<string, Set<(settled?: RunRow) => void>>();
  private started = false;
  private claiming = false;
  private claimAgain = false;
  private pokeScheduled = false;
  private lastDeathCheck = -Infinity;
  private readonly timers: NodeJS.Timeout[] = [];
  private wakeTimer: NodeJS.Timeout | null = null;
  private wakeTimerAt = Infinity;
  private unsubscribeClock: (() => void) | null = null;
  private readonly reloads = new Set<string>();
  /** Consecutive store failures per run: a write the database refuses every time must end the run. */
  private readonly storeFailures = new Map<string, { count: number; error: unknown }>();
  private registration: ExecutorRow | null = null;

  constructor(
    readonly store: Store,
    readonly clock: Clock,
    private readonly workflows: ReadonlyMap<string, WorkflowFunction>,
    private readonly options: ExecutorOptions,
  ) {}

  get running(): boolean {
    return this.started;
  }

  get loadedRunIds(): string[] {
    return [...this.executions.keys()];
  }

  async start(): Promise<void> {
    const sessionPid = "sessionPid" in this.store ? await (this.store as { sessionPid(): Promise<number | null> }).sessionPid() : null;
    const now = this.clock.now();
    const row: ExecutorRow = {
      id: this.executorId,
      hostname: hostname(),
      pid: process.pid,
      backendPid: sessionPid,
      appVersion: this.options.appVersion,
      startedAt: now,
      heartbeatAt: now,
    };
    await this.store.registerExecutor(row);
    this.registration = row;
    executorsInThisProcess.add(this.executorId);
    this.started = true;
    // A jump of a manual clock would make our own heartbeat look stale to executors sharing it.
    this.unsubscribeClock = this.clock.onAdvance(() => {
      void this.heartbeat();
      this.poke();
    });
    if ("onWake" in this.store) (this.store as { onWake(listener: () => void): void }).onWake(() => this.poke());
    const heartbeatMs = Math.max(50, Math.floor(this.options.leaseMs / 3));
    this.timers.push(setInterval(() => void this.heartbeat(), heartbeatMs));
    this.timers.push(setInterval(() => this.poke(true), this.options.pollIntervalMs));
    const maintenance = this.options.maintenance;
    if (maintenance !== undefined) this.timers.push(setInterval(maintenance, this.options.pollIntervalMs));
    for (const timer of this.timers) timer.unref();
    await this.claimPass(true);
  }

  /**
   * Stops claiming and lets go of every loaded run. In-flight steps are abandoned (their signals
   * abort); the runs stay `running` under this executor's id, which is removed, so the next
   * executor to look takes them over at once.
   */
  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    executorsInThisProcess.delete(this.executorId);
    for (const timer of this.timers) clearInterval(timer);
    if (this.wakeTimer !== null) clearTimeout(this.wakeTimer);
    this.unsubscribeClock?.();
    for (const execution of [...this.executions.values()]) execution.lost();
    while (this.claiming) await new Promise((resolve) => setTimeout(resolve, 5));
    await this.store.removeExecutors([this.executorId]);
  }

  /** Starts a run this executor just created (status running, owned here): its journal is empty. */
  startCreated(run: RunRow): void {
    if (this.executions.has(run.id)) return;
    this.load(run, []);
  }

  /** A run owned here that is not loaded (a store error cut its load short): load it on the next poll. */
  reloadLater(runId: string): void {
    this.reloads.add(runId);
  }

  /** Resolves `listener` calls whenever a run settles or lets go here. */
  /** `listener` hears of every change to the run here; a run that settled here comes with its final row. */
  onRunChange(runId: string, listener: (settled?: RunRow) => void): () => void {
    let set = this.listeners.get(runId);
    if (set === undefined) this.listeners.set(runId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(runId);
    };
  }

  notifyRunChange(runId: string, settled?: RunRow): void {
    for (const listener of this.listeners.get(runId) ?? []) listener(settled);
  }

  /** Called by whoever cancelled runs in this process. */
  stopRuns(runIds: string[]): void {
    for (const id of runIds) {
      this.executions.get(id)?.lost();
      this.notifyRunChange(id);
    }
  }

  // ---- ExecutionHost ----------------------------------------------------------------------------

  poke(periodic = false): void {
    if (!this.started) return;
    if (this.claiming) {
      this.claimAgain = true;
      return;
    }
    if (this.pokeScheduled) return;
    this.pokeScheduled = true;
    setImmediate(() => {
      this.pokeScheduled = false;
      void this.claimPass(periodic);
    });
  }

  wakeAt(time: number): void {
    if (!this.started || time >= this.wakeTimerAt) return;
    if (this.wakeTimer !== null) clearTimeout(this.wakeTimer);
    this.wakeTimerAt = time;
    // A manual clock wakes us through onAdvance; this timer serves the real one.
    this.wakeTimer = setTimeout(() => {
      this.wakeTimer = null;
      this.wakeTimerAt = Infinity;
      this.poke();
    }, Math.max(0, time - this.clock.now()));
    this.wakeTimer.unref();
  }

  released(runId: string, reason: "settled" | "suspended" | "lost" | "store-error", error?: unknown, settled?: RunRow): void {
    this.executions.delete(runId);
    if (reason === "store-error") {
      this.reloads.add(runId);
      const failures = this.storeFailures.get(runId);
      this.storeFailures.set(runId, { count: (failures?.count ?? 0) + 1, error });
    } else {
      this.storeFailures.delete(runId);
    }
    this.notifyRunChange(runId, settled);
  }

  // ---- claiming ---------------------------------------------------------------------------------

  private async claimPass(periodic: boolean): Promise<void> {
    if (!this.started || this.claiming) return;
    this.claiming = true;
    try {
      do {
        this.claimAgain = false;
        const now = this.clock.now();
        let dead: string[] = [];
        if (periodic || now - this.lastDeathCheck >= this.options.pollIntervalMs) {
          this.lastDeathCheck = now;
          dead = await this.deadExecutors(now);
          await this.checkLostRuns();
          await this.reloadAfterStoreErrors();
        }
        const capacity = this.options.maxConcurrentRuns - this.executions.size;
        if (capacity > 0) {
          const runs = await this.store.claimRuns({
            executorId: this.executorId,
            appVersion: this.options.recoverAllVersions ? null : this.options.appVersion,
            now,
            deadExecutorIds: dead,
            workflows: [...this.workflows.keys()],
            limit: capacity,
          });
          await Promise.all(
            runs.map(async (run) => {
              try {
                this.load(run, await this.store.loadJournal(run.id));
              } catch (error) {
                // Claimed but not loaded: nobody else will take it while we live, so we must.
                this.reloadLater(run.id);
                this.options.onError(error);
              }
            }),
          );
        }
        if (dead.length > 0) await this.store.removeExecutors(dead);
        const next = await this.store.nextWakeAt(this.options.recoverAllVersions ? null : this.options.appVersion);
        if (next !== null) this.wakeAt(next);
      } while (this.claimAgain && this.started);
    } catch (error) {
      if (this.started) this.options.onError(error);
    } finally {
      this.claiming = false;
    }
  }

  private load(run: RunRow, journal: Parameters<typeof this.newExecution>[1]): void {
    if (!this.started) return;
    const execution = this.newExecution(run, journal);
    if (execution === null) return;
    this.executions.set(run.id, execution);
    execution.execute().catch((error: unknown) => this.options.onError(error));
  }

  private newExecution(run: RunRow, journal: Awaited<ReturnType<Store["loadJournal"]>>): RunExecution | null {
    const fn = this.workflows.get(run.workflow);
    if (fn === undefined) return null;
    return new RunExecution(this, run, fn, journal);
  }

  private async deadExecutors(now: number): Promise<string[]> {
    const executors = await this.store.listExecutors();
    if (this.registration !== null && !executors.some((e) => e.id === this.executorId)) {
      // Our row is gone: a peer presumed us dead (this process was paused past the lease — a
      // SIGSTOP, a long GC, a frozen VM) and took our runs over; fencing refuses our writes into
      // them. Without a row, every run we claim from now on would look orphaned and be taken over
      // at once, its in-flight steps run twice. Come back as a live executor, before claiming.
      await this.store.registerExecutor({ ...this.registration, heartbeatAt: now });
    }
    const me = hostname();
    let livePids: Set<number> | null | undefined;
    const dead: string[] = [];
    for (const executor of executors) {
      if (executor.id === this.executorId) continue;
      let isDead = now - executor.heartbeatAt > this.options.leaseMs;
      if (!isDead && executor.hostname === me) {
        isDead = executor.pid === process.pid ? !executorsInThisProcess.has(executor.id) : !processAlive(executor.pid);
      }
      if (!isDead && executor.backendPid !== null) {
        livePids ??= await this.store.liveBackendPids();
        if (livePids !== null && !livePids.has(executor.backendPid)) isDead = true;
      }
      if (isDead) dead.push(executor.id);
    }
    return dead;
  }

  /** Runs cancelled or taken over by someone else while loaded here stop at once. */
  private async checkLostRuns(): Promise<void> {
    const lost = await this.store.lostRuns(this.executorId, [...this.executions.keys()]);
    this.stopRuns(lost);
  }

  private async reloadAfterStoreErrors(): Promise<void> {
    for (const runId of [...this.reloads]) {
      this.reloads.delete(runId);
      const failures = this.storeFailures.get(runId);
      if (failures !== undefined && failures.count >= MAX_STORE_FAILURES) {
        this.storeFailures.delete(runId);
        await this.failRun(runId, failures);
        continue;
      }
      const run = await this.store.getRun(runId);
      if (run !== undefined && run.status === "running" && run.executorId === this.executorId && !this.executions.has(runId)) {
        this.load(run, await this.store.loadJournal(runId));
      }
    }
  }

  /**
   * A run whose writes the database refused MAX_STORE_FAILURES times in a row (a constraint its own
   * data breaks, say) fails with that error instead of being reloaded forever. A transient outage
   * (connection lost) heals by reloading long before that.
   */
  private async failRun(runId: string, failures: { count: number; error: unknown }): Promise<void> {
    const error = new CairnError(
      `the database refused the writes of run ${runId} ${failures.count} times in a row: ${(failures.error as Error)?.message ?? String(failures.error)}`,
      { runId, cause: failures.error },
    );
    await this.store
      .commit({ runId, executorId: this.executorId }, [
        { type: "finish", runId, status: "failed", output: null, error: errorText(error), at: this.clock.now() },
      ])
      .catch((failure: unknown) => this.options.onError(failure));
    this.notifyRunChange(runId);
  }

  private async heartbeat(): Promise<void> {
    try {
      await this.store.heartbeat(this.executorId, this.clock.now());
    } catch (error) {
      if (this.started) this.options.onError(error);
    }
  }
}

const MAX_STORE_FAILURES = 5;

/** Executors alive in this process: a row with our pid but not in here is a dead predecessor's. */
const executorsInThisProcess = new Set<string>();

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

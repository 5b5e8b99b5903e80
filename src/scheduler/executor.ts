import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { CairnError, PoisonRunError } from "../errors.js";
import type { DeadExecutor, ExecutorRow, RunRow, Store } from "../store/store.js";
import { backoffMs, isTransientStoreError } from "../store/transient.js";
import { isDatabaseCondition } from "../store/store-errors.js";
import { pidNamespace } from "./pid-namespace.js";
import type { Clock } from "../engine/clock.js";
import type { IsolationPool } from "../engine/isolation/pool.js";
import { RunExecution, type ExecutionHost, type WorkflowFunction } from "../engine/run-execution.js";
import { errorText } from "../store/value/index.js";
import { setLongTimeoutAt, type LongTimeout } from "../engine/long-timeout.js";
import { WarmRuns } from "../engine/warm-runs.js";
import type { RunTracing } from "../engine/tracing.js";
import type { QueueDecision, Queues, ReleaseDispatch } from "./queues.js";
import { wakeOf, type Wake } from "./wake-payloads.js";

export interface ExecutorOptions {
  appVersion: string;
  /** Workflows whose succeeded finishes commit without waiting (WorkflowOptions.deferFinishFsync). */
  deferredFinishes?: ReadonlySet<string>;
  /** Claim runs of every application version, not just this one's. */
  recoverAllVersions: boolean;
  /** How long an executor may go without a heartbeat before its runs are taken over. */
  leaseMs: number;
  /** How often to look for claimable runs written by other processes. */
  pollIntervalMs: number;
  maxConcurrentRuns: number;
  /** See CairnOptions.replayStallMs. */
  replayStallMs?: number;
  /**
   * A run taken over more than this many times (since it was created or last resumed) without
   * finishing is parked as failed with a PoisonRunError instead of being recovered again.
   */
  maxRecoveryAttempts: number;
  /** Called with errors the executor cannot hand to anyone (a failed poll, a store outage). */
  onError: (error: unknown) => void;
  /** Housekeeping run on every poll while the executor runs (the retention policy's batches). */
  maintenance?: () => void;
  /** Where isolated steps run (the runtime's pool, closed by its shutdown). */
  isolation?: IsolationPool;
  /** Where runs report their executions and operations (OpenTelemetry, through the face). */
  tracing?: RunTracing;
  /** The queues declared in this process: the executor serves them and dispatches them (queues.ts). */
  queues?: Queues;
  /** See CairnOptions.warmRuns: how many unloaded runs to keep in memory (src/engine/warm-runs.ts). */
  warmRuns?: number;
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
 *
 * "Observable" must not be fooled. A pid is checked only by an executor on the same host, in the
 * same pid namespace on the same boot (containers sharing a hostname see each other's pids as
 * absent). A backend pid is only as good as the session it names: when this executor's session is
 * lost (a server restart, `pg_terminate_backend`, a network drop) its peers will see that pid gone
 * and take its runs, so the executor re-registers under a NEW identity (a new id, the reopened
 * session's pid, or none while it is down — the lease then decides), lets go of every loaded run,
 * and claims them back through fencing like anyone else: a run can never be executed by an old and
 * a new incarnation at once, and the fleet heals by itself once the database is back.
 *
 * Failure semantics of the executor's own writes: a store error that is the database's condition
 * (connection lost, server shutting down, disk full, database locked or read-only, a statement
 * cancelled or timed out, privileges revoked: isDatabaseCondition) never fails a run. The run is let
 * go and loaded again, with exponential backoff, until its writes go through; the executor keeps
 * polling and reports each failed pass to `onError`. Only an error about the data written (a
 * constraint the run's own data breaks) fails the run, after MAX_STORE_FAILURES tries.
 */
export class Executor implements ExecutionHost {
  /** This incarnation's id; it changes when the executor re-registers after losing its session. */
  private currentId: string = randomUUID();
  private readonly executions = new Map<string, RunExecution>();
  private readonly listeners = new Map<string, Set<(settled?: RunRow) => void>>();
  private started = false;
  private claiming = false;
  /** The last claim took as many runs as it had room for: more may be claimable as runs let go. */
  private saturated = false;
  private claimAgain = false;
  /**
   * Whether the next pass claims (`claimRuns`) or only dispatches the queues: a pass asked for
   * only because a run let go of a queue's slot has nothing new to claim, and on SQLite a claim
   * reads every queued run to leave them alone (they are all `enqueued`).
   */
  private claimWanted = true;
  /**
   * Whether the next pass dispatches the queues (and reads the runs peers gave us): every pass
   * but one asked for only because a run became claimable (a `claimable` wake-up: a start, a
   * message, a timer set in the past, a child's end), which has nothing for a queue — with
   * several executors, every one of them heard that wake-up, and each made a dispatch call and a
   * read of its assigned runs for nothing.
   */
  private dispatchWanted = true;
  /**
   * A start woke this executor alone (a `claim` wake-up, CLAIM_WAKE; the start picked it among the
   * executors of the run's version that had registered its workflow): after the next claim, unless
   * it took runs and still had room, the wake-up is passed on to every executor if a started run is
   * still claimable (`passOnClaimable`, one statement). Taking nothing means it could not take the
   * run — it is full — or a peer got there first; filling every
   * free slot means more may be waiting (a burst of starts). Only a run left behind is passed on:
   * passing on a run a peer took would wake every executor to look for nothing, and with starts
   * coming fast those looks take the next starts before their own executors do, which pass them on
   * in turn (measured: 18% of starts passed on, 16 executors). A claim that took runs with room to
   * spare passes nothing on even if a peer's claim had locked the started run meanwhile (SKIP
   * LOCKED) without taking it: the run waits for a poll, as after any lost wake-up.
   */
  private passOnWanted = false;
  /** A read of the runs dispatched to us is in flight (pokeAssigned), and whether another was asked for meanwhile. */
  private assignedReading = false;
  private assignedAgain = false;
  /**
   * Hand-outs of runs to this executor whose rows are loaded after awaits — reads of our assigned
   * runs, dispatches, claims (see staleHandout): how many are in flight, and the runs let go here
   * meanwhile, each with its place in the order of releases.
   */
  private handoutsInFlight = 0;
  private handoutEvents = 0;
  private readonly releasedDuringHandouts = new Map<string, number>();
  private readonly loadedDuringHandouts = new Map<string, number>();
  /** Runs handed out while their execution here was letting go: read again once it has. */
  private readonly rereadOnRelease = new Set<string>();
  private pokeScheduled = false;
  private lastDeathCheck = -Infinity;
  private readonly timers: NodeJS.Timeout[] = [];
  private wakeTimer: LongTimeout | null = null;
  private wakeTimerAt = Infinity;
  private unsubscribeClock: (() => void) | null = null;
  /** Runs claimed while an execution of theirs was still letting go of them: loaded when it has (see load). */
  private readonly claimedWhileLettingGo = new Map<string, { run: RunRow; journal: Awaited<ReturnType<Store["loadJournal"]>> }>();
  /** Runs owned here to load again (a store error cut them short), with when to try next (Date.now() ms). */
  private readonly reloads = new Map<string, number>();
  /** Consecutive store failures per run: a write the database refuses every time must end the run. */
  private readonly storeFailures = new Map<string, { count: number; error: unknown }>();
  private registration: ExecutorRow | null = null;
  /** When (Date.now(): a pause stops every other clock) a heartbeat last sent renewed our row. */
  private renewedAt = Date.now();
  private renewal: Promise<boolean> | null = null;
  /** Runs unloaded here that may continue from memory when claimed here again (src/engine/warm-runs.ts). */
  readonly warmRuns: WarmRuns;

  constructor(
    readonly store: Store,
    readonly clock: Clock,
    private readonly workflows: ReadonlyMap<string, WorkflowFunction>,
    private readonly options: ExecutorOptions,
  ) {
    this.warmRuns = new WarmRuns(options.warmRuns ?? 0, store);
  }

  get executorId(): string {
    return this.currentId;
  }

  /** ExecutionHost: the pool isolated steps run in. */
  get isolation(): IsolationPool | undefined {
    return this.options.isolation;
  }

  get running(): boolean {
    return this.started;
  }

  get tracing(): RunTracing | undefined {
    return this.options.tracing;
  }

  get loadedRunIds(): string[] {
    return [...this.executions.keys()];
  }

  async start(): Promise<void> {
    const now = this.clock.now();
    // Queue declarations first: one the database refuses (a user policy's typo) fails launch()
    // before this executor exists anywhere.
    await this.options.queues?.sync(now);
    this.renewedAt = Date.now();
    const backendPid = await this.sessionPid();
    // Listening before the row (and its wake channel) exists: a start that picks us at once is
    // heard — `woken` keeps what it asked for until the first pass below (passOnWanted).
    this.store.capabilities.wakeNotifications?.onWake((payload) => this.woken(wakeOf(payload)));
    const row: ExecutorRow = {
      id: this.executorId,
      hostname: hostname(),
      pid: process.pid,
      pidNamespace: pidNamespace(),
      backendPid,
      wakeChannel: this.wakeChannelOf(backendPid),
      workflows: [...this.workflows.keys()],
      appVersion: this.options.appVersion,
      startedAt: now,
      heartbeatAt: now,
      capacity: this.options.maxConcurrentRuns,
    };
    await this.store.registerExecutor(row);
    this.registration = row;
    executorsInThisProcess.add(this.executorId);
    executorsById.set(this.executorId, this);
    await this.options.queues?.register(this.executorId, now);
    this.started = true;
    this.rideReleases();
    // A jump of a manual clock would make our own heartbeat look stale to executors sharing it.
    this.unsubscribeClock = this.clock.onAdvance(() => {
      void this.heartbeat();
      this.poke();
    });
    const heartbeatMs = Math.max(50, Math.floor(this.options.leaseMs / 3));
    this.timers.push(setInterval(() => void this.heartbeat(), heartbeatMs));
    this.timers.push(setInterval(() => this.poke(true), this.options.pollIntervalMs));
    const maintenance = this.options.maintenance;
    if (maintenance !== undefined) this.timers.push(setInterval(maintenance, this.options.pollIntervalMs));
    for (const timer of this.timers) timer.unref();
    // One pass, not the loop: with queues, peers' dispatches keep asking for another pass (NOTIFY),
    // and launch() must return while work flows; the passes asked for run right after.
    await this.claimPass(true, true);
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
    executorsById.delete(this.executorId);
    for (const timer of this.timers) clearInterval(timer);
    this.stopRiding?.();
    this.stopRiding = null;
    this.dispatchedOnRelease.clear();
    if (this.contendedRetry !== null) clearTimeout(this.contendedRetry);
    this.contendedRetry = null;
    this.wakeTimer?.clear();
    this.unsubscribeClock?.();
    this.warmRuns.clear();
    for (const execution of [...this.executions.values()]) execution.lost();
    // A claim pass stuck on a dead database must not hold shutdown forever: the row we fail to
    // remove is then taken for dead by its lease (or its vanished pid).
    const giveUpAt = Date.now() + STOP_BOUND_MS;
    while (this.claiming && Date.now() < giveUpAt) await new Promise((resolve) => setTimeout(resolve, 5));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.store.removeExecutors([this.executorId]).catch((error: unknown) => this.options.onError(error)),
      new Promise((resolve) => (timer = setTimeout(resolve, Math.max(0, giveUpAt - Date.now())))),
    ]);
    clearTimeout(timer);
  }

  /** Starts a run this executor just created (status running, owned here): its journal is empty. */
  startCreated(run: RunRow): void {
    if (this.executions.has(run.id)) return;
    this.load(run, []);
  }

  /**
   * Whether this executor is executing the run now: it cannot end without `released` hearing of it
   * (and telling `onRunChange`'s listeners).
   */
  executing(runId: string): boolean {
    return this.executions.get(runId)?.hasHalted === false;
  }

  /** A run owned here that is not loaded (a store error cut its load short): load it on the next poll. */
  reloadLater(runId: string): void {
    if (!this.reloads.has(runId)) this.reloads.set(runId, 0);
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
      this.warmRuns.forget(id);
      this.executions.get(id)?.lost();
      this.notifyRunChange(id);
    }
  }

  // ---- ExecutionHost ----------------------------------------------------------------------------

  poke(periodic = false, dispatchOnly = false): void {
    if (!this.started) return;
    if (!dispatchOnly) this.claimWanted = true;
    this.dispatchWanted = true;
    this.schedulePass(periodic);
  }

  /** A pass that claims and nothing else (a `claimable` wake-up): see dispatchWanted. */
  private pokeClaim(): void {
    if (!this.started) return;
    this.claimWanted = true;
    this.schedulePass(false);
  }

  /**
   * Reads the runs peers (or an enqueue) dispatched to us, and loads them — at once, beside any
   * pass in flight rather than after it: a pass with the periodic death check is several round
   * trips, and a run dispatched to us waited for all of them (the slowest enqueue-to-start
   * latencies). Loading is idempotent (see load), so a pass that finds the same run does no harm.
   * A failed read leaves the runs to the next claiming pass, which reads them too.
   */
  private pokeAssigned(): void {
    const queues = this.options.queues;
    if (!this.started || queues === undefined) return;
    if (this.assignedReading) {
      this.assignedAgain = true;
      return;
    }
    this.assignedReading = true;
    void (async () => {
      try {
        do {
          this.assignedAgain = false;
          await this.loadAssignedRuns(queues, new Map());
        } while (this.assignedAgain && this.started);
      } catch (error) {
        if (this.started && !isTransientStoreError(error)) this.options.onError(error);
      } finally {
        this.assignedReading = false;
      }
    })();
  }

  private schedulePass(periodic: boolean): void {
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

  /**
   * A wake-up asks for the pass it names (wake-payloads.ts): a run enqueued, a dispatch; runs given
   * to us, reading them and nothing else (the dispatcher — a peer, or an enqueue deciding its own
   * run — passes again itself when there is more); runs given to peers only, nothing here; a run
   * made claimable, a claim. Any other, a whole pass.
   */
  private woken(wake: Wake): void {
    if (wake.kind === "any") return this.poke();
    if (wake.kind === "claimable") {
      if (wake.passOn) this.passOnWanted = true;
      return this.pokeClaim();
    }
    if (wake.kind === "dispatched") {
      if (wake.executorIds.includes(this.executorId)) this.pokeAssigned();
      return;
    }
    this.poke(false, true);
  }

  wakeAt(time: number): void {
    if (!this.started || time >= this.wakeTimerAt) return;
    this.wakeTimer?.clear();
    this.wakeTimerAt = time;
    // A manual clock wakes us through onAdvance; this timer serves the real one (chunked: a wake-up
    // weeks away must not fire at once and re-arm in a loop).
    this.wakeTimer = setLongTimeoutAt(
      () => {
        this.wakeTimer = null;
        this.wakeTimerAt = Infinity;
        this.poke();
      },
      time,
      () => this.clock.now(),
      { unref: true },
    );
  }

  /**
   * ExecutionHost: peers count us alive while our row's heartbeat is younger than the lease (half
   * of it leaves room for a heartbeat in flight: they are sent every third of the lease) and, on
   * PostgreSQL, while the database session whose pid our row shows is open.
   */
  leaseFresh(): boolean {
    if (Date.now() - this.renewedAt >= this.options.leaseMs / 2) return false;
    // Our database session was lost (or reopened under another pid): peers judge us by that pid.
    const liveness = this.store.capabilities.sessionLiveness;
    const shown = this.registration?.backendPid ?? null;
    return liveness === null || shown === null || liveness.currentSessionPid() === shown;
  }

  /** ExecutionHost: one renewal at a time, shared by every run that asks (see RunLifecycle.ownsRun). */
  renewLease(): Promise<boolean> {
    this.renewal ??= this.renew().finally(() => (this.renewal = null));
    return this.renewal;
  }

  /**
   * Renews our row, retrying transient errors until it goes through (work waits meanwhile: after a
   * lease's silence it may be a peer's). Then stops the runs a peer took before the renewal — none
   * can be taken after it, since a takeover needs the heartbeat it judged us dead by. False when our
   * row is gone or our database session changed: the identity check this brings on lets every
   * loaded run go (and reloads the ones still ours under the new identity).
   */
  private async renew(): Promise<boolean> {
    for (let failures = 1; this.started; failures++) {
      try {
        if (!(await this.beat())) return false;
        // A new database session means peers may judge us by the pid our row shows, now gone: only
        // the identity check (its re-registration) settles what is still ours. (A row showing no
        // pid was judged by its heartbeat alone, just renewed.)
        const shown = this.registration?.backendPid ?? null;
        if (shown !== null && shown !== (await this.sessionPid())) {
          this.checkIdentitySoon();
          return false;
        }
        await this.checkLostRuns();
        return true;
      } catch (error) {
        if (!isTransientStoreError(error)) this.options.onError(error);
        await new Promise((resolve) => setTimeout(resolve, backoffMs(failures)));
      }
    }
    return false;
  }

  released(runId: string, reason: "settled" | "suspended" | "lost" | "store-error", error?: unknown, settled?: RunRow): void {
    const dispatched = this.dispatchedOnRelease.delete(runId);
    const execution = this.executions.get(runId);
    this.executions.delete(runId);
    // Warm runs: an unloaded execution is kept for a warm continuation (dropped again below if the run was claimed meanwhile).
    if (reason === "suspended" && execution !== undefined) this.warmRuns.park(execution, this.started && execution.fence.executorId === this.executorId);
    const claimed = this.claimedWhileLettingGo.get(runId);
    if (claimed !== undefined) {
      this.claimedWhileLettingGo.delete(runId);
      this.load(claimed.run, claimed.journal);
    }
    if (this.handoutsInFlight > 0) this.releasedDuringHandouts.set(runId, ++this.handoutEvents);
    if (this.rereadOnRelease.delete(runId)) this.reread(runId);
    if (reason === "store-error") {
      const failures = this.storeFailures.get(runId);
      const count = (failures?.count ?? 0) + 1;
      this.storeFailures.set(runId, { count, error });
      this.reloads.set(runId, Date.now() + backoffMs(count));
      // Nobody else hears of a run stalled on its store: say so, without a line per retry.
      if (count === 1 || count % 20 === 0) {
        this.options.onError(new CairnError(`run ${runId}: the database refused its writes (${count}×); retrying with backoff`, { runId, cause: error }));
      }
    } else {
      // The last claim filled every free slot, so due runs may be waiting for this one: claim again
      // (pokes while a pass is in flight fold into one more pass, which takes what freed meanwhile).
      if (this.saturated) this.poke();
      this.storeFailures.delete(runId);
      // A run that ended or went to sleep may have freed a queue's slot: dispatch again now rather
      // than at the next poll — unless the commit that released it did (rideReleases).
      if (reason !== "lost" && this.options.queues?.declared === true && !dispatched) this.poke(false, true);
    }
    this.notifyRunChange(runId, settled);
  }

  // ---- claiming ---------------------------------------------------------------------------------

  private async claimPass(periodic: boolean, once = false): Promise<void> {
    if (!this.started || this.claiming) return;
    this.claiming = true;
    // A start's wake-up to pass on (passOnWanted): carried over passes that end before a claim
    // decides it (our row gone), and passed on as it is when the pass fails.
    let passingOn = false;
    try {
      do {
        this.claimAgain = false;
        const claiming = this.claimWanted || periodic;
        const dispatching = this.dispatchWanted || periodic;
        passingOn ||= this.passOnWanted;
        this.claimWanted = false;
        this.dispatchWanted = false;
        this.passOnWanted = false;
        const now = this.clock.now();
        let dead: DeadExecutor[] = [];
        if (periodic || now - this.lastDeathCheck >= this.options.pollIntervalMs) {
          this.lastDeathCheck = now;
          const executors = await this.store.listExecutors();
          await this.checkIdentity(now, executors);
          dead = await this.deadExecutors(now, executors);
          await this.checkLostRuns();
          await this.reloadAfterStoreErrors();
          await this.findErasedFinishes();
        }
        // Queues first: a woken executor's queued run starts without waiting for the claim of
        // started runs to come back (a round trip, and a commit when it claims). The runs it
        // dispatched here are loaded before the claim counts what is free.
        const queues = this.options.queues;
        if (queues !== undefined && dispatching && !(await this.dispatchQueues(now, queues, claiming))) {
          this.lastDeathCheck = -Infinity; // our row is gone: re-register first, as after a claim
          this.claimAgain = this.claimWanted = this.dispatchWanted = true;
          continue;
        }
        const capacity = this.options.maxConcurrentRuns - this.executions.size;
        const took = capacity > 0 && (claiming || dead.length > 0) ? await this.claimAndLoad(now, dead, capacity) : 0;
        if (took === null) {
          // Our row is gone: peers presumed us dead (we were paused past the lease, or the database
          // was unreachable) and nothing was claimed. Re-register under a new identity at once,
          // before any other claim — a run claimed under the old id would be taken over while it
          // runs here, its steps run twice.
          this.lastDeathCheck = -Infinity;
          this.claimAgain = this.claimWanted = this.dispatchWanted = true;
          continue;
        }
        if (passingOn && (took === 0 || this.saturated)) this.passOn();
        // Full, with runs of our own perhaps due (a timer of ours fired, or a poll): peers leave
        // those to us for the grace (ParkerFirst). Hand them on — the pass-on above does too, for a
        // message that woke a run we parked. Not at a claim-only pass (a `claimable` wake-up to
        // every executor): each full executor would send a statement for it.
        else if (capacity <= 0 && claiming && dispatching) this.passOn(true);
        passingOn = false;
        // Only if each still has the heartbeat it was judged by: one that woke up meanwhile keeps its row.
        if (dead.length > 0) await this.store.removeDeadExecutors(dead);
        // A pass that only dispatched leaves the timers as they were: a run that went to sleep here
        // armed its own (RunLifecycle), and any claiming pass reads the earliest wake-up again — but
        // a claim-only pass (a `claimable` wake-up) that took nothing changed no timer either: with
        // several executors woken by the same start, all but one take nothing, and each read it for
        // nothing. Whole and periodic passes still read it.
        // Full now, a wake-up already due is not armed: the pass it fired would find no room, and
        // read it again — a loop of passes until a run let go here. The next run to let go claims
        // again instead (released, `saturated`); runs due meanwhile wait for that, or for a peer.
        // (Full as counted now, not as the claim found it: a run may have let go during the claim.)
        if ((claiming && (dispatching || took > 0)) || dead.length > 0) {
          const next = await this.store.nextWakeAt(this.options.recoverAllVersions ? null : this.options.appVersion, [...this.workflows.keys()]);
          if (next !== null && next <= this.clock.now() && this.executions.size >= this.options.maxConcurrentRuns) this.saturated = true;
          else if (next !== null) this.wakeAt(next);
        }
      } while (this.claimAgain && this.started && !once);
    } catch (error) {
      if (this.started) this.options.onError(error);
      if (passingOn) this.passOn(); // sent only if a started run is still there
      passingOn = false;
    } finally {
      this.claiming = false;
      this.passOnWanted ||= passingOn; // a first pass (`once`) that ended before its claim
      if (once && this.claimAgain) this.poke();
    }
  }

  /**
   * A start woke us alone and we could not show that nothing is left for the others: wake them all
   * if a started run is still there (passOnWanted). Either way our own due runs, which we could
   * not take, go to everyone (`ownDueOnly`: that alone).
   */
  private passOn(ownDueOnly = false): void {
    this.store.capabilities.wakeNotifications?.passOnClaimable(this.options.appVersion, this.clock.now(), ownDueOnly).catch((error: unknown) => {
      // Lost, the wake-up leaves the run to the next poll, as any lost wake-up does.
      if (this.started && !isTransientStoreError(error)) this.options.onError(error);
    });
  }

  /** Claims up to `capacity` runs and loads them: how many it took, or null when our executor row is gone (nothing claimed). */
  private claimAndLoad(now: number, dead: DeadExecutor[], capacity: number): Promise<number | null> {
    return this.handout(async (claimedAt) => {
      const runs = await this.store.claimRuns({
        executorId: this.executorId,
        appVersion: this.options.recoverAllVersions ? null : this.options.appVersion,
        now,
        deadExecutors: dead,
        workflows: [...this.workflows.keys()],
        limit: capacity,
      });
      this.saturated = runs !== null && runs.length >= capacity;
      if (runs === null) return null;
      await Promise.all(
        runs.map(async (run) => {
          try {
            if (run.recoveries - run.recoveryBase > this.options.maxRecoveryAttempts) return await this.parkPoisonRun(run);
            await this.loadClaimed(run, claimedAt);
          } catch (error) {
            // Claimed but not loaded: nobody else will take it while we live, so we must.
            this.reloadLater(run.id);
            this.options.onError(error);
          }
        }),
      );
      return runs.length;
    });
  }

  /**
   * Dispatches the queues declared here (for this executor and its peers), pokes the peers in this
   * process that got runs, and loads the runs dispatched to this executor — by itself or by a peer
   * in another process. False when this executor's row is gone (nothing was dispatched).
   *
   * `readAssigned`: the runs peers gave us are read only when asked for. With wake-ups that say
   * what happened (PostgreSQL, wake-payloads.ts), a peer's dispatch to us comes with a wake-up
   * naming us, which asks for them (as do a peer's poke in this process, every claiming pass and
   * every poll); a dispatch-only pass — a slot freed here, a run enqueued — has none to look for.
   */
  private dispatchQueues(now: number, queues: Queues, readAssigned: boolean): Promise<boolean> {
    return this.handout((decidedAt) => this.dispatchAndLoad(now, queues, readAssigned, decidedAt));
  }

  private async dispatchAndLoad(now: number, queues: Queues, readAssigned: boolean, decidedAt: number): Promise<boolean> {
    const outcome = await queues.dispatch(this.executorId, now, this.options.leaseMs);
    if (outcome === null) return false;
    for (const decision of outcome.decisions) {
      if (decision.executorId !== this.executorId) executorsById.get(decision.executorId)?.poke();
    }
    if (outcome.more) this.claimAgain = this.dispatchWanted = true;
    if (outcome.nextWakeAt !== null) this.wakeAt(outcome.nextWakeAt);
    if (outcome.contended) this.retryContended();
    if (queues.served().length === 0) return true;
    const given = new Map(outcome.decisions.filter((decision) => decision.executorId === this.executorId).map((decision) => [decision.runId, decision]));
    if (readAssigned || this.store.capabilities.wakeNotifications === null) await this.loadAssignedRuns(queues, given, decidedAt);
    else await Promise.all([...given.values()].map((decision) => this.loadAssigned(decision.runId, decision.loaded, { at: decidedAt, kind: "grant" })));
    return true;
  }

  /**
   * PostgreSQL: a pass found a queue's lock held by what may be an enqueue (dispatch-function.ts,
   * `busy`) — whose last look may have come before a run committed, that run's wake-up having
   * bounced off the same lock, and which hears no wake-ups to pass again itself. One dispatch
   * pass again shortly (one timer at a time, however many passes bounce), not at the next poll.
   */
  private retryContended(): void {
    if (this.contendedRetry !== null || !this.started) return;
    this.contendedRetry = setTimeout(() => {
      this.contendedRetry = null;
      this.poke(false, true);
    }, CONTENDED_RETRY_MS);
    this.contendedRetry.unref();
  }

  private contendedRetry: NodeJS.Timeout | null = null;

  /**
   * Loads the runs this executor's own dispatch just `given` it at once, and the ones peers (in
   * another process: those here were poked) or enqueues gave it, found by `assigned`, read meanwhile.
   */
  private async loadAssignedRuns(queues: Queues, given: ReadonlyMap<string, QueueDecision>, decidedAt?: number, always = false): Promise<void> {
    if (!always && queues.served().length === 0) return;
    // Runs running here are left out of the read.
    const running = [...this.executions].filter(([, execution]) => !execution.hasHalted).map(([id]) => id);
    await this.handout(async (issuedAt) => {
      const assigned = queues.assigned(this.executorId, [...given.keys(), ...running]);
      assigned.catch(() => undefined); // awaited below; a failure must not be unhandled while the given runs load
      const grant = { at: decidedAt ?? issuedAt, kind: "grant" as const };
      await Promise.all([...given.values()].map((decision) => this.loadAssigned(decision.runId, decision.loaded, grant)));
      const others = (await assigned).filter((run) => !given.has(run.runId));
      await Promise.all(others.map((run) => this.loadAssigned(run.runId, run.loaded, { at: issuedAt, kind: "read" })));
    });
  }

  /**
   * Runs `body`, a hand-out of runs to this executor (see staleHandout), with its place in the
   * order of loads and releases here; loads and releases are recorded while any is in flight.
   */
  private async handout<T>(body: (issuedAt: number) => Promise<T>): Promise<T> {
    this.handoutsInFlight++;
    try {
      return await body(this.handoutEvents);
    } finally {
      if (--this.handoutsInFlight === 0) {
        this.releasedDuringHandouts.clear();
        this.loadedDuringHandouts.clear();
      }
    }
  }

  /** An execution of `id` starts here (loaded, or a warm one woken): hand-outs in flight must know (staleHandout). */
  private noteLoaded(id: string): void {
    if (this.handoutsInFlight > 0) this.loadedDuringHandouts.set(id, ++this.handoutEvents);
  }

  /**
   * Whether a run handed to this executor (sent at `issuedAt` in the order of loads and releases
   * here) may not be loaded from the hand-out's row:
   *
   * - A `read` of our assigned runs cannot tell a run that is ours from one whose execution here
   *   is letting go of it — its last commit (the finish, a suspend) still in flight, the row still
   *   `running` under us. Loaded, such a row started the run again with the journal it had then:
   *   its steps ran twice. Stale: a run loaded here, or let go of since the read was sent.
   * - A `grant` (a dispatch decision, a claim) hands a run out only once nobody runs it, but its
   *   row is loaded after awaits, and a read concurrent with it (pokeAssigned) may have loaded the
   *   same run first — and that execution may have ended since. Stale: a run loaded here, or
   *   loaded here since the grant was sent. (Let go of since is no sign: a run that suspended and
   *   was claimed back before its release was heard continues warm.)
   *
   * A stale run is read again once no execution here holds it: if it really is ours (a queued run
   * that suspended and was dispatched back to us, a claim after a suspend), that read finds it.
   */
  private staleHandout(id: string, issuedAt: number, kind: "read" | "grant"): boolean {
    const current = this.executions.get(id);
    if (current !== undefined) {
      if (current.hasHalted) this.rereadOnRelease.add(id);
      return true;
    }
    const since = (kind === "read" ? this.releasedDuringHandouts : this.loadedDuringHandouts).get(id) ?? 0;
    if (since > issuedAt) {
      this.reread(id);
      return true;
    }
    return false;
  }

  /** Reads a run again, now that no execution here holds it, and loads it if it is ours (running under us). */
  private reread(id: string): void {
    void this.handout((at) => this.loadAssigned(id, undefined, { at, kind: "read" }));
  }

  /**
   * SQLite: the queues are dispatched inside every group commit that ends or unloads a run here
   * (`Store.claimOnRelease`), for the slots it frees: the runs that fill them start after that one
   * commit, where an ordinary pass after it waited for a transaction and an fsync of its own — a
   * third of a one-step run's commits. Queues declared after launch are dispatched by the ordinary
   * passes alone, which still follow every release (delayed starts, rate windows, what this left).
   */
  private rideReleases(): void {
    const queues = this.options.queues;
    if (queues === undefined || !queues.declared || this.store.claimOnRelease === undefined) return;
    // A getter: the claim is fenced by the id of the incarnation at each commit (it changes when this executor re-registers).
    const executor = this;
    this.stopRiding = this.store.claimOnRelease<ReleaseDispatch>({
      get executorId() {
        return executor.executorId;
      },
      now: () => this.clock.now(),
      claim: async (db, now) =>
        this.started
          ? queues.dispatchWithin(db, this.executorId, now, this.options.leaseMs)
          : { decisions: [], more: false, complete: false, nextWakeAt: null },
      committed: (outcome, released) => {
        if (outcome === null) {
          // Our row is gone: the ordinary pass re-registers first (see claimPass).
          this.lastDeathCheck = -Infinity;
          this.poke();
          return;
        }
        const given = new Map<string, QueueDecision>();
        for (const decision of outcome.decisions) {
          if (decision.executorId !== this.executorId) executorsById.get(decision.executorId)?.poke();
          else given.set(decision.runId, decision);
        }
        if (outcome.nextWakeAt !== null) this.wakeAt(outcome.nextWakeAt);
        if (outcome.complete) {
          // The dispatch pass these releases call for is done: `released` asks for none (a whole
          // pass cost as much CPU as the rest of a one-step run's queue work). What it would still
          // have done — read the runs peers in other processes gave us — is done here. Noted only
          // for executions here, which hear of their release next: a store shared by several
          // Cairns commits others' releases in the same batch, and a parked poison run's finish is
          // released by no one.
          for (const runId of released) if (this.executions.has(runId)) this.dispatchedOnRelease.add(runId);
          this.loadAssignedRuns(queues, given).catch((error: unknown) => this.options.onError(error));
        } else {
          for (const decision of given.values()) void this.loadAssigned(decision.runId, decision.loaded);
        }
        if (outcome.more) this.poke(false, true);
      },
      failed: (error) => {
        // Nothing was dispatched: the ordinary pass after the release does it.
        if (this.started) this.options.onError(error);
      },
    });
  }

  private stopRiding: (() => void) | null = null;
  /** Runs whose release a complete dispatch pass rode (rideReleases): `released` passes no more for them. */
  private readonly dispatchedOnRelease = new Set<string>();

  /**
   * A run dispatched to this executor: loaded unless it is loaded already or not ours (any more).
   * `loaded`: its row as the dispatch left it, which needs no reading again (nor its journal, when
   * it has none).
   */
  private async loadAssigned(id: string, loaded?: { run: RunRow; hasSteps: boolean }, handout?: { at: number; kind: "read" | "grant" }): Promise<void> {
    // A run whose execution here is still letting go of it counts as not loaded (see load), unless
    // the hand-out may be stale (staleHandout).
    if (this.executions.get(id)?.hasHalted === false || this.reloads.has(id)) return;
    if (handout !== undefined && this.staleHandout(id, handout.at, handout.kind)) return;
    try {
      // Both reads at once: on PostgreSQL two pooled connections, one round trip's wait.
      const [run, journal] =
        loaded === undefined
          ? await Promise.all([this.store.getRun(id), this.store.loadJournal(id)])
          : [loaded.run, loaded.hasSteps ? await this.store.loadJournal(id) : []];
      if (run === undefined || run.status !== "running" || run.executorId !== this.executorId) return;
      // Loaded or let go of meanwhile (by a read of the same run): checked again after the awaits.
      if (handout !== undefined && this.staleHandout(id, handout.at, handout.kind)) return;
      this.load(run, journal);
    } catch (error) {
      this.reloadLater(id);
      this.options.onError(error);
    }
  }

  private load(run: RunRow, journal: Parameters<typeof this.newExecution>[1]): void {
    if (!this.started) return;
    this.warmRuns.forget(run.id); // loaded from its journal: a parked execution of it is stale
    const current = this.executions.get(run.id);
    if (current !== undefined) {
      // Stopped but not yet let go: it committed its suspend (or lost the run) and has not heard
      // back yet, and this claim came after that commit — the store hands out a run only once
      // nobody runs it. Dropping the claim would leave the run ours with nothing running it, for
      // good: it is loaded as soon as the old execution lets go (see released).
      if (current.hasHalted) this.claimedWhileLettingGo.set(run.id, { run, journal });
      // Otherwise it is loaded already: a run dispatched here and started here at once (startCreated) is seen twice.
      return;
    }
    const execution = this.newExecution(run, journal);
    if (execution === null) return;
    this.executions.set(run.id, execution);
    this.noteLoaded(run.id);
    execution.execute().catch((error: unknown) => this.options.onError(error));
  }

  // ---- warm runs (src/engine/warm-runs.ts) ------------------------------------------------------

  /** A run claimed here: continued from memory if its parked execution may (WarmRuns.take), else loaded from its journal. */
  private async loadClaimed(run: RunRow, claimedAt: number): Promise<void> {
    // Most claimed runs were never parked here: no await for them (10,000 runs waking pay for each).
    const warm = this.executions.has(run.id) || !this.warmRuns.holds(run.id) ? undefined : await this.warmRuns.take(run, this.executorId);
    if (warm !== undefined && this.started && !this.executions.has(run.id) && warm.parked && warm.fence.executorId === this.executorId) {
      if (this.staleHandout(run.id, claimedAt, "grant")) return warm.dropWaits();
      this.executions.set(run.id, warm);
      this.noteLoaded(run.id);
      warm.wake();
      return;
    }
    warm?.dropWaits();
    const journal = await this.store.loadJournal(run.id);
    // A read of our assigned runs may have loaded it meanwhile, or it is still letting go here: see staleHandout.
    if (this.staleHandout(run.id, claimedAt, "grant")) return;
    this.load(run, journal);
  }

  /**
   * A finish deferred here (WorkflowOptions.deferFinishFsync) that a crash of the database server
   * erased leaves its run running under our id with nothing running it. Re-registering after the
   * lost session moves such runs to the new id and loads them again; but a session reopened under
   * the same backend pid (the server's host rebooted and the pid came round again), or lost again
   * while its replacement was being registered, would not. So an executor that has deferred a
   * finish also reads, at each death check, the runs that are ours and not loaded here, and loads
   * them (the read of our assigned runs that queue dispatch uses, with its guard against a run
   * that let go here meanwhile).
   */
  private async findErasedFinishes(): Promise<void> {
    const queues = this.options.queues;
    if (queues === undefined || this.store.durability.rederivable === 0) return;
    await this.loadAssignedRuns(queues, new Map(), undefined, true);
  }

  /** ExecutionHost: WorkflowOptions.deferFinishFsync. */
  finishDefers(workflow: string): boolean {
    return this.options.deferredFinishes?.has(workflow) === true;
  }

  private newExecution(run: RunRow, journal: Awaited<ReturnType<Store["loadJournal"]>>): RunExecution | null {
    const fn = this.workflows.get(run.workflow);
    if (fn === undefined) return null;
    return new RunExecution(this, run, fn, journal, this.options.replayStallMs);
  }

  private async sessionPid(): Promise<number | null> {
    return this.store.capabilities.sessionLiveness?.sessionPid() ?? null;
  }

  /**
   * PostgreSQL: the channel the session with this pid hears our own wake-ups on (recorded with the
   * pid it comes from). SQLite, which has no channels: our store's name as a parker (Store.ownParker),
   * so the runs we park are known as ours.
   */
  private wakeChannelOf(sessionPid: number | null): string | null {
    const notifications = this.store.capabilities.wakeNotifications;
    if (notifications === null) return this.store.ownParker();
    return sessionPid === null ? null : notifications.ownChannelOf(sessionPid);
  }

  /**
   * Re-registers when what peers judge our life by no longer holds: the database session whose pid
   * is in our row was lost (peers see that pid gone), or our row itself is gone (a peer presumed us
   * dead: the database was unreachable past the lease, or this process was paused — SIGSTOP, a long
   * GC, a frozen VM). Either way peers may have taken our runs. Without a fresh registration every
   * run we claim would look orphaned and be taken over at once, its in-flight steps run twice.
   */
  private async checkIdentity(now: number, executors: ExecutorRow[]): Promise<void> {
    const registration = this.registration;
    if (registration === null) return;
    const sessionPid = await this.sessionPid();
    const rowGone = !executors.some((e) => e.id === registration.id);
    // Never write the old id again once its row is gone: that would resurrect an identity whose
    // runs peers have taken (and whose later claims they would take as orphans).
    if (!rowGone && registration.backendPid === null && sessionPid !== null) {
      // Back from a session outage during which no peer could judge us by a pid: just show the new one.
      this.registration = { ...registration, backendPid: sessionPid, wakeChannel: this.wakeChannelOf(sessionPid) };
      await this.store.registerExecutor({ ...this.registration, heartbeatAt: now });
      return;
    }
    if (registration.backendPid !== sessionPid || rowGone) await this.reincarnate(now, sessionPid);
  }

  /**
   * A new identity: a new id and the current session pid (or none). Every loaded run is let go —
   * its execution is fenced under the old id from now on — and the runs the old id still owns (a
   * peer may have taken some) move to the new id in one statement, then load again from their
   * journals. That move is not a recovery: a database fault does not bring a run closer to being
   * parked as a poison run.
   */
  private async reincarnate(now: number, sessionPid: number | null): Promise<void> {
    const old = this.registration!;
    const row: ExecutorRow = {
      ...old,
      id: randomUUID(),
      backendPid: sessionPid,
      wakeChannel: this.wakeChannelOf(sessionPid),
      workflows: [...this.workflows.keys()],
      startedAt: now,
      heartbeatAt: now,
    };
    this.renewedAt = Date.now();
    await this.store.registerExecutor(row);
    this.registration = row;
    this.currentId = row.id;
    executorsInThisProcess.add(row.id);
    executorsInThisProcess.delete(old.id);
    executorsById.set(row.id, this);
    executorsById.delete(old.id);
    // Claims made under the old id move with transferRuns below, like every run it owned.
    this.claimedWhileLettingGo.clear();
    this.warmRuns.clear(); // parked under the old id: its fence holds no more
    for (const execution of [...this.executions.values()]) execution.lost();
    this.reloads.clear();
    this.storeFailures.clear();
    for (const runId of await this.store.transferRuns(old.id, row.id, now)) this.reloadLater(runId);
    await this.store.removeExecutors([old.id]);
    await this.options.queues?.register(row.id, now);
    this.reincarnations++;
  }

  /** How many times this executor re-registered under a new identity (tests and diagnostics). */
  reincarnations = 0;

  /** `executors` as listed before any re-registration: a row of our former self counts as dead. */
  private async deadExecutors(now: number, executors: ExecutorRow[]): Promise<DeadExecutor[]> {
    const me = hostname();
    const myNamespace = pidNamespace();
    let sessions: SessionJudge | null | undefined;
    const dead: DeadExecutor[] = [];
    for (const executor of executors) {
      if (executor.id === this.executorId) continue;
      let isDead = now - executor.heartbeatAt > this.options.leaseMs;
      // A pid means something only in the namespace (and boot) that issued it.
      if (!isDead && executor.hostname === me && executor.pidNamespace === myNamespace) {
        isDead = executor.pid === process.pid ? !executorsInThisProcess.has(executor.id) : !processAlive(executor.pid);
      }
      if (!isDead && executor.backendPid !== null) {
        sessions ??= await this.trustedSessions(executors);
        if (sessions !== null && !sessions(executor)) isDead = true;
      }
      if (isDead) dead.push({ id: executor.id, heartbeatAt: executor.heartbeatAt });
    }
    return dead;
  }

  /**
   * Whether a peer's session is open, or null when sessions cannot be trusted to judge peers: when
   * our own session is missing too, every session was just lost (a restart, a mass termination)
   * and our own re-registration is still to come — peers judged now would be re-judged after it,
   * and the runs taken from them run a second step twice. Read off the listed rows when they say
   * (`sessionOpen`, PostgreSQL's listExecutors: the same statement, the same moment), else from the
   * live pids, a read of its own.
   */
  private async trustedSessions(executors: ExecutorRow[]): Promise<SessionJudge | null> {
    const own = this.registration?.backendPid ?? null;
    const listed = executors.find((e) => e.id === this.executorId);
    if (listed !== undefined && listed.backendPid === own && executors.every((e) => e.backendPid === null || typeof e.sessionOpen === "boolean")) {
      return own !== null && listed.sessionOpen === false ? null : (executor) => executor.sessionOpen !== false;
    }
    const live = await this.store.liveBackendPids();
    if (live === null) return null;
    return own !== null && !live.has(own) ? null : (executor) => executor.backendPid === null || live.has(executor.backendPid);
  }

  /** Runs cancelled or taken over by someone else while loaded here stop at once. */
  private async checkLostRuns(): Promise<void> {
    const lost = await this.store.lostRuns(this.executorId, [...this.executions.keys()]);
    // Not stopRuns, which also drops a warm run: a run that unloaded while this was asked is
    // reported too, and its parked execution stays (WarmRuns.take checks it when it is claimed).
    for (const id of lost) {
      this.executions.get(id)?.lost();
      this.notifyRunChange(id);
    }
  }

  /**
   * Loads again the runs a store error cut short, each when its backoff is over. A run leaves the
   * list only once it is loaded (or no longer ours): a reload that fails itself stays on the list
   * with a longer backoff, so an outage never orphans a run.
   */
  private async reloadAfterStoreErrors(): Promise<void> {
    const now = Date.now(); // backoff is real time, whatever clock the runs use
    for (const [runId, retryAt] of [...this.reloads]) {
      if (retryAt > now || !this.reloads.has(runId)) continue;
      const failures = this.storeFailures.get(runId);
      try {
        if (failures !== undefined && failures.count >= MAX_STORE_FAILURES && !isDatabaseCondition(failures.error)) {
          await this.failRun(runId, failures);
          this.storeFailures.delete(runId);
          this.reloads.delete(runId);
          continue;
        }
        const run = await this.store.getRun(runId);
        if (run !== undefined && run.status === "running" && run.executorId === this.executorId && !this.executions.has(runId)) {
          if (run.recoveries - run.recoveryBase > this.options.maxRecoveryAttempts) {
            await this.parkPoisonRun(run);
            this.reloads.delete(runId);
            continue;
          }
          const journal = await this.store.loadJournal(runId);
          if (this.reloads.delete(runId)) this.load(run, journal);
        } else {
          this.reloads.delete(runId);
        }
      } catch (error) {
        const count = (failures?.count ?? 0) + 1;
        this.storeFailures.set(runId, { count, error });
        if (this.reloads.has(runId)) this.reloads.set(runId, Date.now() + backoffMs(count));
        this.options.onError(error);
      }
    }
  }

  /**
   * A run recovered more than maxRecoveryAttempts times without finishing kills whatever loads it
   * (see PoisonRunError): it is failed, under the fence this claim just gave us, for a person to
   * look at and `cairn resume`.
   */
  private async parkPoisonRun(run: RunRow): Promise<void> {
    const attempts = run.recoveries - run.recoveryBase;
    const error = new PoisonRunError(
      `run ${run.id} (workflow "${run.workflow}") was recovered ${attempts} times without finishing, more than maxRecoveryAttempts ` +
        `(${this.options.maxRecoveryAttempts}): it likely crashes or stalls every executor that runs it. It is parked as failed; ` +
        `fix the cause, then \`cairn resume ${run.id}\``,
      { runId: run.id },
    );
    await this.store.commit({ runId: run.id, executorId: this.executorId }, [
      { type: "finish", runId: run.id, status: "failed", output: null, error: errorText(error), at: this.clock.now() },
    ]);
    this.notifyRunChange(run.id);
  }

  /**
   * A run whose writes the database refused MAX_STORE_FAILURES times in a row for their data (a
   * constraint they break, a value too large) fails with that error instead of being reloaded
   * forever. A refusal that is the database's condition (isDatabaseCondition: an outage, statements
   * cancelled by `statement_timeout` or an operator, a failover's read-only hours, revoked
   * privileges) never fails a run, however long it lasts: the run is reloaded with backoff, reported
   * at the first refusal and every 20th, and goes on when the condition ends. Before, a sixth
   * cancelled commit failed the run — and under a read-only database the failure itself waited,
   * to be written the moment the database came back.
   */
  private async failRun(runId: string, failures: { count: number; error: unknown }): Promise<void> {
    const error = new CairnError(
      `the database refused the writes of run ${runId} ${failures.count} times in a row: ${(failures.error as Error)?.message ?? String(failures.error)}`,
      { runId, cause: failures.error },
    );
    await this.store.commit({ runId, executorId: this.executorId }, [
      { type: "finish", runId, status: "failed", output: null, error: errorText(error), at: this.clock.now() },
    ]);
    this.notifyRunChange(runId);
  }

  /**
   * A heartbeat that meets a transient error is tried again with backoff, up to the next one. It
   * only renews an existing row: one that finds our row gone (peers presumed us dead) brings on an
   * identity check at once instead of bringing the old id back to life.
   */
  private async heartbeat(): Promise<void> {
    if (this.beating) return;
    this.beating = true;
    try {
      const giveUpAt = Date.now() + Math.max(50, Math.floor(this.options.leaseMs / 3));
      for (let failures = 1; this.started; failures++) {
        try {
          await this.beat();
          return;
        } catch (error) {
          if (!isTransientStoreError(error) || Date.now() + backoffMs(failures) > giveUpAt) throw error;
          await new Promise((resolve) => setTimeout(resolve, backoffMs(failures)));
        }
      }
    } catch (error) {
      if (this.started) this.options.onError(error);
    } finally {
      this.beating = false;
    }
  }

  private beating = false;

  /**
   * Renews our row (and `renewedAt`, from before the statement was sent). False when the row is
   * gone — peers presumed us dead — after asking for the identity check that re-registers us.
   */
  private async beat(): Promise<boolean> {
    const sentAt = Date.now();
    if (!(await this.store.heartbeat(this.executorId, this.clock.now()))) {
      this.checkIdentitySoon();
      return false;
    }
    this.renewedAt = Math.max(this.renewedAt, sentAt);
    return true;
  }

  /** The next claim pass begins with the identity check (see checkIdentity). */
  private checkIdentitySoon(): void {
    this.lastDeathCheck = -Infinity;
    this.poke(true);
  }
}

const MAX_STORE_FAILURES = 5;

/**
 * How soon a dispatch pass that found a queue's lock held passes again (see retryContended): about
 * the holder's commit (a WAL flush), so the retry usually finds the lock free.
 */
const CONTENDED_RETRY_MS = 5;

/** How long `stop()` waits for a claim pass in flight and for its row's removal. */
const STOP_BOUND_MS = 5_000;

/** Executors alive in this process: a row with our pid but not in here is a dead predecessor's. */
const executorsInThisProcess = new Set<string>();

/** The same, by id: a dispatch pokes the peers in this process it gave runs to (SQLite has no NOTIFY). */
const executorsById = new Map<string, Executor>();

/** Whether a listed peer's database session is open (Executor.trustedSessions). */
type SessionJudge = (executor: ExecutorRow) => boolean;

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

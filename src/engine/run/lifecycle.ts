import { FencedError, TimeoutError } from "../../errors.js";
import type { CommitOptions, Fence, RunRow, Store, StoredValue, WriteOp } from "../../store/store.js";
import { errorText, toStored } from "../../store/value/index.js";
import type { AttemptHost } from "../attempts.js";
import type { Clock } from "../clock.js";
import type { CompletionOrder } from "../completion-order.js";
import type { IsolationPool } from "../isolation/pool.js";
import type { RunEnd, RunTrace, RunTracing } from "../tracing.js";
import { StopSignal } from "./stop-signal.js";

/** What an execution needs from the executor that loaded it. */
export interface ExecutionHost {
  readonly store: Store;
  readonly clock: Clock;
  readonly executorId: string;
  /** Where steps with `isolation: "process"` run (absent: such a step fails, saying so). */
  readonly isolation?: IsolationPool | undefined;
  /** New work may be claimable now (a child was enqueued, a message sent, a run unloaded). */
  poke(): void;
  /** An unloaded run wants waking at `time`. */
  wakeAt(time: number): void;
  /** Runs this execution cancelled (its children): stop those loaded here at once (the executor's `stopRuns`). */
  stopRuns?(runIds: string[]): void;
  /** The execution let go of its run: it finished, unloaded, lost its lease or hit a store error. */
  released(runId: string, reason: "settled" | "suspended" | "lost" | "store-error", error?: unknown, settled?: RunRow): void;
  /** Where runs report their executions and live operations (OpenTelemetry, when configured). */
  readonly tracing?: RunTracing;
  /** Whether peers still count this executor alive without asking the database (see RunLifecycle.ownsRun). */
  leaseFresh?(): boolean;
  /** Renews the executor's lease now and stops the runs peers took meanwhile; false if its row is gone. */
  renewLease?(): Promise<boolean>;
  /** Whether the workflow's succeeded finishes commit without waiting (WorkflowOptions.deferFinishFsync). */
  finishDefers?(workflow: string): boolean;
}

/** A succeeded finish of a workflow with `deferFinishFsync` (see settle). */
const REDERIVABLE: CommitOptions = Object.freeze({ deferDurability: true, rederivable: true });

/** A durable wait the run unloads on: a time, a message topic, a child's end. */
export interface Wait {
  wakeAt: number | null;
  topic: string | null;
  childRunId: string | null;
  /** A select waits for the first of several: every topic and child it names wakes it. */
  topics?: readonly string[];
  childRunIds?: readonly string[];
}

/**
 * A durable wait as its run keeps it while loaded: what it waits for, how it looks again when the
 * run continues warm (the same look a replay would make on reaching it: the timer, the inbox, the
 * child), and the workflow's promise it settles.
 */
interface HeldWait {
  wait: Wait;
  again: () => Promise<unknown>;
  settle: { resolve: (value: unknown) => void; reject: (error: unknown) => void };
}

/** A promise that never settles: what a stopped run's pending operations return. */
export const never = <T>(): Promise<T> => new Promise<T>(() => undefined);

/**
 * How a loaded run ends here: settled (its outcome recorded), unloaded when it is blocked on durable
 * waits alone, lost to another executor or a cancel, failed by its deadline, or given back after a
 * store error. The journal core (journal-core.ts) builds on it; `stopped` and `active` are what the
 * durable operations consult and keep.
 */
export abstract class RunLifecycle {
  readonly runId: string;
  readonly workflowName: string;
  /** This executor's claim on the run: a commit under it fails once another executor took the run over. */
  readonly fence: Fence;
  /** Operations acting live now: the run does not unload while any is. */
  active = 0;
  /** Aborted when the run stops here for any reason: every step's signal follows it (a new one if it continues warm). */
  stopSignal = new StopSignal();
  /** What a step's attempts ask of the run (attempts.ts). */
  readonly attemptHost: AttemptHost = new LifecycleAttemptHost(this);
  /** This execution's trace (tracing.ts), when something records it; set before the workflow runs. */
  trace: RunTrace | undefined = undefined;
  /** The order outcomes are handed over in: closed when the run stops. */
  abstract readonly order: CompletionOrder;
  private readonly waits = new Map<number, HeldWait>();
  /**
   * Waits looking again after a warm wake-up: a look that waits again keeps its workflow promise.
   * Made by the first warm wake-up (this and `carriers` are per loaded run: thousands of runs in
   * flight pay for every collection each one makes whether it is used or not).
   */
  private redriving: Map<number, HeldWait["settle"]> | undefined;
  /** Whether this execution committed a record with `deferDurability` (counted: see settle). */
  private deferredRecords = false;
  /** Records waiting to ride with the run's next commit (JournalCore.ride). */
  protected riders: WriteOp[] = [];
  /** The commits in flight that carry riders, each resolving to whether it landed them (made by the first). */
  protected carriers: Set<Promise<boolean>> | undefined;
  private suspendCheckScheduled = false;
  private halted = false;
  /** Unloaded, kept in memory for a warm continuation (warm-runs.ts); `disturbed` once anything looked at it. */
  private parking = false;
  private disturbed = false;
  /** When the wait the execution last unloaded for ends by time (its earliest timer, or the run's deadline); null: only a message or a child ends it. */
  private parkedUntil: number | null = null;

  constructor(
    readonly host: ExecutionHost,
    readonly run: RunRow,
  ) {
    this.runId = run.id;
    this.workflowName = run.workflow;
    this.fence = { runId: run.id, executorId: host.executorId };
  }

  /**
   * Whether the run stopped here (settled, unloaded, lost). Reading it while the execution is
   * parked marks it disturbed: whatever asked (an operation the workflow called meanwhile, the
   * workflow's own end) was turned away, as it is in any unloaded run, and only a replay calls it
   * again — so a disturbed execution never continues warm.
   */
  get stopped(): boolean {
    if (this.parking) this.disturbed = true;
    return this.halted;
  }

  /**
   * Whether the run stopped here, as the executor's bookkeeping asks (is it still running here,
   * is it letting go): unlike `stopped`, the question disturbs nothing — only what the workflow
   * itself calls while parked bars a warm continuation. (Read through `stopped`, a dispatch pass
   * that happened to run during a suspend's commit cost the run its warm wake-up: 4 in 10 of a
   * lone executor's sleeping runs replayed.)
   */
  get hasHalted(): boolean {
    return this.halted;
  }

  /** When the wait this execution is parked in ends by time, if it does (see parkedUntil): warm-runs.ts arms a timer at it. */
  get wakesAt(): number | null {
    return this.parkedUntil;
  }

  get store(): Store {
    return this.host.store;
  }

  get clock(): Clock {
    return this.host.clock;
  }

  /** The run's row as loaded (ids, parent, root, deadline, version). */
  get info(): Readonly<RunRow> {
    return this.run;
  }

  /** The executor learned this run was cancelled or taken over: stop at once, write nothing. */
  lost(): void {
    if (this.halted) return;
    this.stop(new FencedError(`run ${this.runId} is no longer owned by this executor`, { runId: this.runId }));
    this.letGo("lost");
  }

  /**
   * Whether work with effects may start for this run now (a step's body, a model call, a tool, a
   * retry). Fencing keeps a run's late commits out once peers took it over, but not the effects of
   * a body begun meanwhile: after this process was paused (SIGSTOP, a frozen VM, a long GC) past
   * its lease, peers may already run the very step it is about to start. So when the executor's
   * lease was last renewed more than half a lease ago, the lease is renewed — and the runs peers
   * took meanwhile are stopped here — before the work starts; false if this run stopped. A pause
   * that falls between this check and the body is not covered: at-least-once remains the step's
   * contract, this only narrows the window from the length of the pause to a few instructions.
   * The common case (the lease fresh) costs a clock read and no promise.
   */
  ownsRun(): boolean | Promise<boolean> {
    if (this.stopped) return false;
    if (this.host.leaseFresh?.() !== false || this.host.renewLease === undefined) return true;
    return this.host.renewLease().then((held) => held && !this.stopped);
  }

  /** Whether something other than durable waits keeps the run loaded (replay's bookkeeping). */
  protected abstract busy(): boolean;

  /** Whether new work may start: not stopped, deadline not passed. */
  live(): boolean {
    if (this.stopped) return false;
    const deadline = this.run.deadlineAt;
    if (deadline !== null && this.clock.now() >= deadline) {
      void this.timeOut();
      return false;
    }
    return true;
  }

  protected armDeadline(): void {
    const deadline = this.run.deadlineAt;
    if (deadline === null) return;
    this.clock.sleep(deadline - this.clock.now(), this.stopSignal.signal).then(
      () => void this.timeOut(),
      () => undefined,
    );
  }

  private async timeOut(): Promise<void> {
    if (this.stopped) return;
    const error = new TimeoutError(`run ${this.runId} passed its deadline (${new Date(this.run.deadlineAt ?? 0).toISOString()})`, {
      runId: this.runId,
    });
    await this.settle("failed", error);
  }

  /**
   * A durable wait: the run unloads once nothing else is in flight. Its promise settles only if the
   * run continues warm (`wake`), with what `again` — the operation looking again, as a replay would
   * on reaching it — gives; after an ordinary unload the execution is garbage and a replay calls the
   * operation anew.
   */
  waitFor<T>(seq: number, wait: Wait, again: () => Promise<T>): Promise<T> {
    const settle = this.redriving?.get(seq);
    if (settle !== undefined) {
      // Looked again after a warm wake-up and must wait on: the workflow's promise stays the one it holds.
      this.redriving!.delete(seq);
      this.waits.set(seq, { wait, again, settle });
      this.scheduleSuspendCheck();
      return never();
    }
    return new Promise<T>((resolve, reject) => {
      this.waits.set(seq, { wait, again, settle: { resolve: resolve as (value: unknown) => void, reject } });
      this.scheduleSuspendCheck();
    });
  }

  /**
   * Whether the operation at `seq` is all the run does or waits for: no other operation acts live,
   * and no other durable wait is held or looking again (JournalCore.ride).
   */
  aloneWith(seq: number): boolean {
    if (this.active !== 1 || this.waits.size > (this.waits.has(seq) ? 1 : 0)) return false;
    for (const other of this.redriving?.keys() ?? []) if (other !== seq) return false;
    return true;
  }

  /** An operation stopped acting live (see `active`). */
  settleActive(): void {
    this.active--;
    this.scheduleSuspendCheck();
  }

  /**
   * Unloads the run when it is blocked on durable waits alone. The check runs on the next turn of
   * the event loop, after the workflow's pending microtasks have called whatever they will call.
   */
  protected scheduleSuspendCheck(): void {
    if (this.suspendCheckScheduled || this.waits.size === 0) return;
    this.suspendCheckScheduled = true;
    setImmediate(() => {
      this.suspendCheckScheduled = false;
      if (!this.stopped && this.active === 0 && this.waits.size > 0 && !this.busy()) {
        void this.suspend();
      }
    });
  }

  private async suspend(): Promise<void> {
    this.halted = true;
    this.parking = true;
    this.disturbed = false;
    this.order.close();
    const waits = [...this.waits.values()].map((held) => held.wait);
    const times = waits.map((w) => w.wakeAt).filter((t): t is number => t !== null);
    if (this.run.deadlineAt !== null) times.push(this.run.deadlineAt);
    const wait = {
      wakeAt: times.length === 0 ? null : Math.min(...times),
      topics: waits.flatMap((w) => [...(w.topic === null ? [] : [w.topic]), ...(w.topics ?? [])]),
      childRunIds: waits.flatMap((w) => [...(w.childRunId === null ? [] : [w.childRunId]), ...(w.childRunIds ?? [])]),
    };
    this.stopSignal.abort(() => new FencedError("run unloaded while it waits"));
    try {
      await this.commit([{ type: "suspend", runId: this.runId, wait, at: this.clock.now() }]);
    } catch (error) {
      this.parking = false;
      this.letGo(error instanceof FencedError ? "lost" : "store-error", error);
      return;
    }
    this.parkedUntil = wait.wakeAt;
    this.letGo("suspended");
    if (wait.wakeAt !== null) this.host.wakeAt(wait.wakeAt);
    this.host.poke();
  }

  /** Records the run's outcome. Called at most once per execution. */
  protected async settle(status: "succeeded" | "failed", value: unknown): Promise<void> {
    if (this.stopped) return;
    this.halted = true;
    this.order.close();
    let output: StoredValue | null = null;
    let error: string | null = null;
    let failure: unknown = value;
    if (status === "succeeded") {
      try {
        output = toStored(value, `run ${this.runId} output`);
      } catch (unstorable) {
        status = "failed";
        error = errorText(unstorable);
        failure = unstorable;
      }
    } else {
      error = errorText(value);
    }
    this.stopSignal.abort(() => new FencedError("run settled"));
    // WorkflowOptions.deferFinishFsync: a succeeded outcome is what a replay of the durable journal
    // returns again, so its commit need not wait to be durable — unless a record it may stand on
    // (a model call's, deferModelCallFsync) is not durable yet: then it waits, as every finish does.
    // This run's own deferred records count even while still in flight (a model call not awaited).
    // Nor may any operation still be acting or committing (a step that lost a race the workflow
    // returned from): its record may never land, and a replay after an erased finish would run it
    // again — with a durable finish there is no replay.
    const { deferred, durable } = this.store.durability;
    const defers =
      status === "succeeded" &&
      this.active === 0 &&
      this.carrying() === 0 &&
      !this.deferredRecords &&
      durable >= deferred &&
      this.host.finishDefers?.(this.workflowName) === true;
    try {
      const finish = { type: "finish", runId: this.runId, status, output, error, at: this.clock.now(), hasParent: this.run.parentId !== null } as const;
      const ops: WriteOp[] = [finish];
      await (defers ? this.commit(ops, REDERIVABLE) : this.commit(ops));
    } catch (failure) {
      this.letGo(failure instanceof FencedError ? "lost" : "store-error", failure);
      return;
    }
    const at = this.clock.now();
    this.dropWaits();
    this.trace?.end(status, status === "failed" ? failure : undefined);
    this.host.released(this.runId, "settled", undefined, {
      ...this.run,
      status,
      output: output?.text ?? null,
      error,
      executorId: null,
      wakeAt: null,
      updatedAt: at,
      finishedAt: at,
    });
    // Only a child's end can make work claimable here (its waiting parent); a top-level run's cannot.
    if (this.run.parentId !== null) this.host.poke();
  }

  /** How many commits carrying riders are in flight. */
  protected carrying(): number {
    return this.carriers?.size ?? 0;
  }

  /**
   * Commits ops under the run's fence, the records riding with the run first (JournalCore.ride).
   * While a commit carries them it is one of `carriers`; one that fails puts them back in front,
   * for the next commit (a refused send's run goes on). Throws what the store throws (FencedError:
   * the run was lost).
   */
  protected async commit(ops: WriteOp[], options?: CommitOptions): Promise<void> {
    if (options?.deferDurability === true && options.rederivable !== true) this.deferredRecords = true;
    const carried = this.riders.length === 0 ? null : this.riders;
    if (carried !== null) {
      ops = [...carried, ...ops];
      this.riders = [];
    }
    const committing = options === undefined ? this.store.commit(this.fence, ops) : this.store.commit(this.fence, ops, options);
    if (carried !== null) {
      const landed = committing.then(
        () => true,
        () => false,
      );
      const carriers = (this.carriers ??= new Set());
      carriers.add(landed);
      void landed.then(() => carriers.delete(landed));
    }
    try {
      await committing;
    } catch (error) {
      if (carried !== null) this.riders = [...carried, ...this.riders];
      throw error;
    }
    this.committed(ops);
  }

  /** Ops that reached the database under the run's fence. */
  protected committed(_ops: readonly WriteOp[]): void {}

  /** Tells the executor (and the trace) that this execution let go of its run, unsettled. */
  letGo(how: Exclude<RunEnd, "succeeded" | "failed">, error?: unknown): void {
    // An unloaded execution's waits are the warm-run cache's to keep or drop (warm-runs.ts).
    if (how !== "suspended") this.dropWaits();
    this.trace?.end(how, error);
    this.host.released(this.runId, how, error);
  }

  protected stop(reason: unknown): void {
    this.halted = true;
    this.parking = false;
    this.order.close();
    this.stopSignal.abort(() => reason);
  }

  /** A store call failed under this run: let the executor load it again later; nothing is recorded. */
  storeFailed<T>(error: unknown): Promise<T> {
    if (!this.stopped) {
      this.stop(error);
      this.letGo("store-error", error);
    }
    return never();
  }

  // ---- warm continuation (warm-runs.ts) ----------------------------------------------------------

  /**
   * Whether this execution, unloaded, may continue warm: its suspend was committed, nothing looked
   * at it since (see `stopped`), and no trace was opened for it (a traced run is loaded again, one
   * span per load, as before).
   */
  get parked(): boolean {
    return this.parking && !this.disturbed && this.halted && this.trace === undefined && this.active === 0;
  }

  /**
   * Continues a parked execution, claimed again by the executor that parked it with its journal
   * unchanged (warm-runs.ts checked both): it becomes live again as a new load would (a new stop
   * signal, the deadline armed and checked, the order of hand-overs reopened), and each durable
   * wait looks again — the timer, the inbox, the child — exactly as replay does on reaching the
   * same operation, in the order the workflow called them. Whatever that look finds settles the
   * promise the workflow awaits; a look that finds nothing waits again, and the run unloads again.
   */
  wake(): void {
    this.parking = false;
    this.halted = false;
    this.stopSignal = new StopSignal();
    this.order.reopen();
    const held = [...this.waits.entries()].sort(([a], [b]) => a - b);
    this.waits.clear();
    this.armDeadline();
    if (!this.live()) return;
    // All of them are looking again before the first look runs: a sleep that ends at once must
    // know it is not alone (aloneWith), even when the waits beside it come later in seq order.
    const redriving = (this.redriving ??= new Map());
    for (const [seq, wait] of held) redriving.set(seq, wait.settle);
    for (const [seq, wait] of held) this.redrive(seq, wait);
  }

  /**
   * Lets go of the workflow's pending waits for good (the execution is not kept, or no longer):
   * nothing can settle them now, and the execution, its journal and the workflow's frames become
   * garbage as in any unloaded run. (Held resolvers would keep them reachable meanwhile.)
   */
  dropWaits(): void {
    this.waits.clear();
    this.redriving?.clear();
  }

  private redrive(seq: number, held: HeldWait): void {
    const redriving = (this.redriving ??= new Map());
    redriving.set(seq, held.settle);
    // As replay's skeleton does before an operation acts (operation.ts): after a pause past the
    // lease, the run may be a peer's by now.
    const owned = this.ownsRun();
    const looked = owned === true ? held.again() : Promise.resolve(owned).then((mine) => (mine ? held.again() : never()));
    looked.then(
      (value) => {
        if (redriving.get(seq) === held.settle) redriving.delete(seq);
        held.settle.resolve(value);
      },
      (error: unknown) => {
        if (redriving.get(seq) === held.settle) redriving.delete(seq);
        held.settle.reject(error);
      },
    );
  }

  /** The run was taken from this executor mid-operation. */
  lostNever<T>(): Promise<T> {
    this.lost();
    return never();
  }
}

/**
 * A run's side of its steps' attempts. A class rather than an object literal with a getter and
 * closures: thousands of runs are loaded at once, and such a literal costs ~700 bytes a run (its
 * properties in a dictionary, a closure each) against a few dozen.
 */
class LifecycleAttemptHost implements AttemptHost {
  constructor(private readonly lifecycle: RunLifecycle) {}

  get runId(): string {
    return this.lifecycle.runId;
  }

  get clock(): Clock {
    return this.lifecycle.clock;
  }

  get stopSignal(): AbortSignal {
    return this.lifecycle.stopSignal.signal;
  }

  stopped(): boolean {
    return this.lifecycle.stopped;
  }

  owned(): boolean | Promise<boolean> {
    return this.lifecycle.ownsRun();
  }
}

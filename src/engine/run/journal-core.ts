import { FencedError, InvalidSpecError, NonDeterminismError, RunNotFoundError, TimeoutError } from "../../errors.js";
import type { Fence, RunRow, StepKind, StepRecord, StepRow, Store, StoredValue, WriteOp } from "../../store/store.js";
import { errorFromText, errorText, fromStored, toStored } from "../../store/value/index.js";
import type { AttemptHost } from "../attempts.js";
import type { Clock } from "../clock.js";
import { CompletionOrder } from "../completion-order.js";
import { validateOperationName } from "../names.js";
import { ReplayJournal, operationBase, operationScopes, storedPath, topScope, type OperationScope } from "../replay-journal.js";

/** What an execution needs from the executor that loaded it. */
export interface ExecutionHost {
  readonly store: Store;
  readonly clock: Clock;
  readonly executorId: string;
  /** New work may be claimable now (a child was enqueued, a message sent, a run unloaded). */
  poke(): void;
  /** An unloaded run wants waking at `time`. */
  wakeAt(time: number): void;
  /** The execution let go of its run: it finished, unloaded, lost its lease or hit a store error. */
  released(runId: string, reason: "settled" | "suspended" | "lost" | "store-error", error?: unknown, settled?: RunRow): void;
}

/** A durable wait the run unloads on: a time, a message topic, a child's end. */
export interface Wait {
  wakeAt: number | null;
  topic: string | null;
  childRunId: string | null;
}

/**
 * How long replay waits for the workflow to call the operation whose recorded outcome comes next
 * before it reports the run as diverged (see CompletionOrder). Generous: user code may legitimately
 * await timers between durable operations (the AI SDK's retry delays, for one).
 */
export const DEFAULT_REPLAY_STALL_MS = 30_000;

/**
 * One call of a durable operation: its place in the journal (seq, identity, path, key), the record
 * replay found for it, and — filled in as the operation goes live — what it will commit. One object
 * per call, made by `begin`; the skeleton (operation.ts) and the rooms keep their state in it rather
 * than allocating more.
 */
export interface Began {
  seq: number;
  /** This operation's identity (see replay-journal.ts): the scope of whatever it calls. */
  identity: string;
  /** Its `path` column. */
  path: string | null;
  /** Its idempotency key: `runId:seq` at the workflow's top, `<enclosing key>/<kind>:<name>#<n>` inside a step. */
  key: string;
  kind: StepKind;
  name: string;
  fingerprint: string | undefined;
  row: StepRow | undefined;
  /** Called inside another operation (a step's function), which keeps the run loaded meanwhile. */
  nested: boolean;
  /** For a call without a record during replay: resolves when it may go ahead (ReplayJournal.clearance). */
  clearance: Promise<void> | null;
  /** When it went live. */
  startedAt: number;
  /** Rows to commit together with its record (a message, an event, a child's run, a model call's row). */
  also: WriteOp[] | null;
  /** Whether its recorded outcome is a failure, and what the workflow is then thrown. */
  failed: boolean;
  thrown: unknown;
}

/** A promise that never settles: what a stopped run's pending operations return. */
export const never = <T>(): Promise<T> => new Promise<T>(() => undefined);

/**
 * One loaded run's journal and lifecycle: the position in the journal (identities, records, the
 * order outcomes are handed over in), the writes under the run's fence, and how the run ends —
 * settled, unloaded on durable waits, lost, or failed by a divergence or its deadline. The durable
 * operations (the rooms beside this file) are built on it through the skeleton in operation.ts;
 * RunExecution (run-execution.ts) is the context the workflow sees.
 *
 * The journal is read once, when the run is loaded; after that the position lives in memory and
 * each operation does one write. Members the rooms use are public; none is part of the API.
 */
export class JournalCore {
  readonly runId: string;
  readonly workflowName: string;
  readonly fence: Fence;
  readonly journal: ReplayJournal;
  /** The order outcomes are handed to the workflow in, live and on replay. */
  readonly order: CompletionOrder;
  readonly topScope: OperationScope;
  /** Operations acting live now: the run does not unload while any is. */
  active = 0;
  stopped = false;
  /** Aborted when the run stops here for any reason: every step's signal follows it. */
  readonly stopSignal = new AbortController();
  readonly attemptHost: AttemptHost;
  /** Calls made during replay that the journal has no record of (for a divergence's message). */
  private readonly unrecordedCalls: string[] = [];
  private waitingForClearance = 0;
  private readonly waits = new Map<number, Wait>();
  private suspendCheckScheduled = false;

  constructor(
    readonly host: ExecutionHost,
    readonly run: RunRow,
    journal: readonly StepRow[],
    replayStallMs: number,
  ) {
    this.runId = run.id;
    this.workflowName = run.workflow;
    this.fence = { runId: run.id, executorId: host.executorId };
    this.attemptHost = { runId: run.id, clock: host.clock, stopSignal: this.stopSignal.signal, stopped: () => this.stopped };
    this.topScope = topScope(this, run.id);
    this.journal = new ReplayJournal(journal);
    this.order = new CompletionOrder(this.journal.replayOrdinals, this.journal.highestOrdinal, replayStallMs, (ordinal) =>
      this.stalled(ordinal),
    );
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

  /**
   * The journal's record for the next operation of this kind and name called from here, if any:
   * lets a layer above tell replay from live without taking the record.
   */
  peek(kind: StepKind, name: string, fingerprint?: string): StepRow | undefined {
    const scope = this.scope();
    const occurrence = scope.calls.get(operationBase(scope.identity, kind, name, fingerprint)) ?? 0;
    return this.journal.look(scope.identity, kind, name, fingerprint, occurrence);
  }

  /**
   * True while recorded operations remain to be asked for, or their outcomes to be handed to the
   * workflow (see WorkflowContext).
   */
  get isReplaying(): boolean {
    return this.order.replaying() || this.journal.replaying();
  }

  /** Whether the caller's own scope still has recorded operations to replay: it ran past here before. */
  get replayingHere(): boolean {
    return this.journal.replayingIn(this.scope().identity);
  }

  /** The executor learned this run was cancelled or taken over: stop at once, write nothing. */
  lost(): void {
    if (this.stopped) return;
    this.stop(new FencedError(`run ${this.runId} is no longer owned by this executor`, { runId: this.runId }));
    this.host.released(this.runId, "lost");
  }

  // ---- identity and replay ----------------------------------------------------------------------

  /**
   * Takes the next position in the caller's scope (synchronously, so operations called in the same
   * order number the same way on every replay) and looks up the journal's record at that path.
   * Returns null if the record contradicts the call: the run has then been failed with a
   * NonDeterminismError naming both.
   */
  begin(name: string, kind: StepKind, fingerprint?: string): Began | null {
    if (this.stopped) return null;
    validateOperationName(kind, name);
    const scope = this.scope();
    if (scope.refuse !== undefined) {
      throw new InvalidSpecError(
        "operation",
        `${kind} "${name}"`,
        `durable operations cannot be called inside ${scope.refuse}'s function (run ${this.runId}): its SQL commits ` +
          "together with the step's own record, so nothing inside it can be journaled apart; call it before or after",
      );
    }
    const base = operationBase(scope.identity, kind, name, fingerprint);
    const occurrence = scope.calls.get(base) ?? 0;
    scope.calls.set(base, occurrence + 1);
    const row = this.journal.empty ? undefined : this.journal.take(scope.identity, kind, name, fingerprint, occurrence);
    const nested = scope !== this.topScope;
    const seq = row?.seq ?? this.journal.newSeq();
    const began: Began = {
      seq,
      identity: `${base}#${occurrence}`,
      path: storedPath(scope.identity, occurrence),
      key: nested ? `${scope.key}/${kind}:${name}#${occurrence}` : `${this.runId}:${seq}`,
      kind,
      name,
      fingerprint,
      row,
      nested,
      clearance: row === undefined && !this.journal.empty ? this.journal.clearance(scope.identity, kind, name) : null,
      startedAt: 0,
      also: null,
      failed: false,
      thrown: undefined,
    };
    if (row !== undefined && fingerprint !== undefined && row.fingerprint !== null && row.fingerprint !== fingerprint) {
      this.diverged(
        `at seq ${row.seq}: the journal recorded ${kind} "${name}" with fingerprint ${row.fingerprint} but the code ` +
          `called it with fingerprint ${fingerprint}`,
        row.seq,
      );
      return null;
    }
    if (row === undefined && this.order.replaying()) this.unrecordedCalls.push(`${kind} "${name}"${fingerprint === undefined ? "" : ` (fingerprint ${fingerprint})`}`);
    return began;
  }

  /**
   * Whether a call without a record may act now: during replay it first waits until no record of
   * its kind and name is left uncalled (ReplayJournal.clearance), so a divergent call never reaches
   * the outside world.
   */
  async cleared(began: Began): Promise<boolean> {
    if (began.clearance !== null) {
      this.waitingForClearance++;
      try {
        await began.clearance;
      } finally {
        this.waitingForClearance--;
      }
    }
    return this.live();
  }

  /**
   * Refuses a wait that only a message or another run can end inside a step's function: the step
   * keeps the run loaded, and such waits end by unloading and waking the run.
   */
  refuseNestedWait(what: string, name: string): void {
    if (this.scope() === this.topScope) return;
    throw new InvalidSpecError(
      "operation",
      `${what} "${name}"`,
      `${what} cannot wait inside a step's or tool's function (run ${this.runId}): the step keeps the run loaded, and ` +
        "this wait ends only when the run unloads and is woken; call it from the workflow itself",
    );
  }

  /** The scope the caller runs in: its enclosing operation's, or the workflow's top. */
  scope(): OperationScope {
    const scope = operationScopes.getStore();
    return scope !== undefined && scope.owner === this ? scope : this.topScope;
  }

  /** Hands a recorded outcome to the workflow at its turn: its value, or its error thrown. */
  async replayed(row: StepRow): Promise<unknown> {
    if (!(await this.delivered(row.completion))) return never();
    return this.replay(row);
  }

  /** Waits for this outcome's turn (see CompletionOrder); false if the run stopped meanwhile. */
  delivered(completion: number | null): Promise<boolean> | boolean {
    const turn = this.order.deliver(completion);
    // The common case — its turn, now — costs no promise.
    return turn === null ? this.handedOver() : turn.then(() => this.handedOver());
  }

  private handedOver(): boolean {
    this.scheduleSuspendCheck();
    return !this.stopped;
  }

  /** A record's outcome: its value, or its error thrown. */
  replay(row: StepRow): unknown {
    if (row.status === "failed") throw errorFromText(row.error ?? '{"name":"Error","message":"unknown"}');
    return fromStored(row.output);
  }

  /** Replay waited in vain for the operation whose outcome comes next: the code took another path. */
  private stalled(ordinal: number): void {
    const row = this.journal.byOrdinal(ordinal);
    const what = row === undefined ? `completion ${ordinal}` : `${row.kind} "${row.name}" at seq ${row.seq}`;
    const instead = this.unrecordedCalls.length === 0 ? "" : `; it called ${this.unrecordedCalls.slice(0, 5).join(", ")}, which the journal has no record of,`;
    this.diverged(
      `: the journal recorded ${what} as the next operation to complete, but replay has not called it${instead} ` +
        "(the code no longer calls it, calls it differently, or calls it only after something that was not recorded)",
      row?.seq,
    );
  }

  private diverged(detail: string, seq: number | undefined): void {
    const error = new NonDeterminismError(
      `run ${this.runId} (workflow "${this.workflowName}") is not deterministic${detail.startsWith(":") ? "" : " "}${detail}. The workflow code changed ` +
        "under an in-flight run, or branches on something not recorded. Route nondeterminism through ctx, guard code " +
        "changes with ctx.patched(name), then `cairn resume` the run.",
      { runId: this.runId, seq },
    );
    void this.settle("failed", error);
  }

  // ---- records and writes -----------------------------------------------------------------------

  /**
   * A journal record for the operation `began` names. Its completion ordinal is taken now, unless
   * given (null: a record whose outcome the workflow does not see yet, a sleep's start).
   */
  record(
    began: Began,
    startedAt: number,
    outcome: { output?: StoredValue | null; error?: unknown; errorText?: string | null },
    attempts: number,
    completion: number | null = this.order.reserve(),
  ): StepRecord {
    const failed = "error" in outcome || outcome.errorText !== undefined;
    return {
      runId: this.runId,
      seq: began.seq,
      name: began.name,
      kind: began.kind,
      status: failed ? "failed" : "succeeded",
      output: failed ? null : (outcome.output ?? null),
      error: outcome.errorText !== undefined ? (outcome.errorText ?? errorText(new Error("unknown error"))) : failed ? errorText(outcome.error) : null,
      startedAt,
      finishedAt: this.clock.now(),
      attempts,
      path: began.path,
      completion,
      fingerprint: began.fingerprint ?? null,
    };
  }

  /** Commits ops under this run's fence; false means the run was lost (and is now released). */
  async write(ops: WriteOp[]): Promise<boolean> {
    try {
      await this.store.commit(this.fence, ops);
      return !this.stopped;
    } catch (error) {
      if (error instanceof FencedError) {
        this.lost();
        return false;
      }
      // Only a message op fails so (its destination run does not exist): the sender records it.
      if (error instanceof RunNotFoundError) throw error;
      // The database failed under us: give the run back to the executor to load again later.
      if (!this.stopped) {
        this.stop(error);
        this.host.released(this.runId, "store-error", error);
      }
      return false;
    }
  }

  /**
   * Writes a step's record with `also` in one commit (poking the executor after it if `poke`: it
   * enqueued work), then waits for its turn to be handed over.
   */
  async writeAndDeliver(step: StepRecord, also: WriteOp[] | null = null, poke = false): Promise<boolean> {
    if (!(await this.write(also === null || also.length === 0 ? [{ type: "step", step }] : [...also, { type: "step", step }]))) return false;
    if (poke) this.host.poke();
    return this.delivered(step.completion ?? null);
  }

  where(seq: number, name: string): string {
    return `run ${this.runId} seq ${seq} ("${name}")`;
  }

  // ---- how the run ends here --------------------------------------------------------------------

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

  /** A durable wait: never settles here; the run unloads once nothing else is in flight. */
  waitFor<T>(seq: number, wait: Wait): Promise<T> {
    this.waits.set(seq, wait);
    this.scheduleSuspendCheck();
    return never();
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
  private scheduleSuspendCheck(): void {
    if (this.suspendCheckScheduled || this.waits.size === 0) return;
    this.suspendCheckScheduled = true;
    setImmediate(() => {
      this.suspendCheckScheduled = false;
      if (!this.stopped && this.active === 0 && this.waits.size > 0 && !this.order.busy() && this.waitingForClearance === 0) {
        void this.suspend();
      }
    });
  }

  private async suspend(): Promise<void> {
    this.stopped = true;
    this.order.close();
    const waits = [...this.waits.values()];
    const times = waits.map((w) => w.wakeAt).filter((t): t is number => t !== null);
    if (this.run.deadlineAt !== null) times.push(this.run.deadlineAt);
    const wait = {
      wakeAt: times.length === 0 ? null : Math.min(...times),
      topics: waits.flatMap((w) => (w.topic === null ? [] : [w.topic])),
      childRunIds: waits.flatMap((w) => (w.childRunId === null ? [] : [w.childRunId])),
    };
    this.stopSignal.abort(new FencedError("run unloaded while it waits"));
    try {
      await this.store.commit(this.fence, [{ type: "suspend", runId: this.runId, wait, at: this.clock.now() }]);
    } catch (error) {
      this.host.released(this.runId, error instanceof FencedError ? "lost" : "store-error", error);
      return;
    }
    this.host.released(this.runId, "suspended");
    if (wait.wakeAt !== null) this.host.wakeAt(wait.wakeAt);
    this.host.poke();
  }

  /** Records the run's outcome. Called at most once per execution. */
  protected async settle(status: "succeeded" | "failed", value: unknown): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.order.close();
    let output: StoredValue | null = null;
    let error: string | null = null;
    if (status === "succeeded") {
      try {
        output = toStored(value, `run ${this.runId} output`);
      } catch (unstorable) {
        status = "failed";
        error = errorText(unstorable);
      }
    } else {
      error = errorText(value);
    }
    this.stopSignal.abort(new FencedError("run settled"));
    try {
      await this.store.commit(this.fence, [{ type: "finish", runId: this.runId, status, output, error, at: this.clock.now() }]);
    } catch (failure) {
      this.host.released(this.runId, failure instanceof FencedError ? "lost" : "store-error", failure);
      return;
    }
    const at = this.clock.now();
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

  private stop(reason: unknown): void {
    this.stopped = true;
    this.order.close();
    this.stopSignal.abort(reason);
  }

  /** A store call failed under this run: let the executor load it again later; nothing is recorded. */
  storeFailed<T>(error: unknown): Promise<T> {
    if (!this.stopped) {
      this.stop(error);
      this.host.released(this.runId, "store-error", error);
    }
    return never();
  }

  /** The run was taken from this executor mid-operation. */
  lostNever<T>(): Promise<T> {
    this.lost();
    return never();
  }
}

import { randomUUID } from "node:crypto";
import { FencedError, InvalidSpecError, NonDeterminismError, RunNotFoundError, TimeoutError } from "../errors.js";
import type { Fence, RunRow, SqlClient, StepKind, StepRecord, StepRow, Store, StoredValue, WriteOp } from "../store/store.js";
import type { Clock } from "./clock.js";
import type {
  ChildHandle,
  ChildOptions,
  ChildWorkflow,
  RecvOptions,
  StepCall,
  StepOptions,
  WorkflowContext,
} from "./context.js";
import { runAttempts, type AttemptHost } from "./attempts.js";
import { isTransientStoreError } from "../store/transient.js";
import { errorFromText, errorText, fromStored, storableThrown, storedText, toStored } from "../store/value/index.js";
import { CompletionOrder } from "./completion-order.js";
import { assertUserSend } from "./reserved-topics.js";
import { validateName, validateOperationName, validateRunId, validateTopic } from "./names.js";
import { ReplayJournal, operationBase, operationScopes, storedPath, topScope, type OperationScope } from "./replay-journal.js";

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

export type WorkflowFunction = (ctx: WorkflowContext, input: never) => Promise<unknown>;

interface Wait {
  wakeAt: number | null;
  topic: string | null;
  childRunId: string | null;
}

/** A durable operation for the layers above the engine; see `RunExecution.operation`. */
export interface OperationSpec<T> {
  kind: StepKind;
  name: string;
  /**
   * What the operation is called with, where the layer knows it (a prompt's hash, a tool input's
   * hash): recorded, and compared on replay, where a different one is a NonDeterminismError.
   */
  fingerprint?: string;
  execute: (call: StepCall & { seq: number }) => Promise<T> | T;
  options?: StepOptions;
  /** Rows to commit together with the checkpoint (a model call's record, a budget charge). */
  alsoWrite?: (outcome: { ok: true; value: T } | { ok: false; error: unknown }, seq: number) => WriteOp[];
  onRecorded?: (value: T, seq: number, live: boolean) => void;
}


/** How often a run waiting on a child that is not its own (a fork's inherited child) looks again. */
const FOREIGN_CHILD_POLL_MS = 2_000;

/**
 * How long replay waits for the workflow to call the operation whose recorded outcome comes next
 * before it reports the run as diverged (see CompletionOrder). Generous: user code may legitimately
 * await timers between durable operations (the AI SDK's retry delays, for one).
 */
export const DEFAULT_REPLAY_STALL_MS = 30_000;

/** A journal lookup's answer for one call: its seq and path, and the record if there is one. */
interface Began {
  seq: number;
  /** This operation's identity (see replay-journal.ts): the scope of whatever it calls. */
  identity: string;
  /** Its `path` column. */
  path: string | null;
  /** Its idempotency key: `runId:seq` at the workflow's top, `<enclosing key>/<kind>:<name>#<n>` inside a step. */
  key: string;
  row: StepRow | undefined;
  /** Called inside another operation (a step's function), which keeps the run loaded meanwhile. */
  nested: boolean;
  /** For a call without a record during replay: resolves when it may go ahead (ReplayJournal.clearance). */
  clearance: Promise<void> | null;
}

/** A promise that never settles: what a stopped run's pending operations return. */
const never = <T>(): Promise<T> => new Promise<T>(() => undefined);

/**
 * One loaded run: the workflow function running against its journal. The journal is read once,
 * when the run is loaded; after that the position lives in memory and each operation does one
 * write. The run unloads (and this object becomes garbage) when it settles, when it is blocked on
 * nothing but durable waits, or when it learns it no longer owns the run.
 */
export class RunExecution implements WorkflowContext {
  readonly runId: string;
  readonly workflowName: string;
  private readonly journal: ReplayJournal;
  /** The order outcomes are handed to the workflow in, live and on replay. */
  private readonly order: CompletionOrder;
  private readonly topScope: OperationScope;
  private active = 0;
  /** Calls made during replay that the journal has no record of (for a divergence's message). */
  private readonly unrecordedCalls: string[] = [];
  private waitingForClearance = 0;
  private readonly waits = new Map<number, Wait>();
  private stopped = false;
  private suspendCheckScheduled = false;
  /** Aborted when the run stops here for any reason: every step's signal follows it. */
  private readonly stopSignal = new AbortController();
  readonly fence: Fence;
  private readonly attemptHost: AttemptHost;

  constructor(
    private readonly host: ExecutionHost,
    private readonly run: RunRow,
    private readonly fn: WorkflowFunction,
    journal: readonly StepRow[],
    replayStallMs = DEFAULT_REPLAY_STALL_MS,
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

  /** Runs the workflow to its end (or until it unloads) and records the outcome. */
  async execute(): Promise<void> {
    this.armDeadline();
    if (!this.live()) return;
    let output: unknown;
    try {
      output = await operationScopes.run(this.topScope, () => this.fn(this, fromStored(this.run.input) as never));
    } catch (error) {
      if (!this.stopped) await this.settle("failed", error);
      return;
    }
    if (!this.stopped) await this.settle("succeeded", output);
  }

  /** The executor learned this run was cancelled or taken over: stop at once, write nothing. */
  lost(): void {
    if (this.stopped) return;
    this.stop(new FencedError(`run ${this.runId} is no longer owned by this executor`, { runId: this.runId }));
    this.host.released(this.runId, "lost");
  }

  // ---- WorkflowContext ------------------------------------------------------------------------

  step<T>(name: string, fn: (call: StepCall) => Promise<T> | T, options: StepOptions = {}): Promise<T> {
    return this.operation({ kind: "step", name, execute: fn, options });
  }

  /**
   * The durable-operation primitive `step` is made of, open to the layers above the engine (model
   * calls, tool calls): runs `execute` with retries, records its outcome under `kind`, and commits
   * `alsoWrite`'s rows in the same transaction as the checkpoint. On replay `execute` does not run;
   * `onRecorded` sees the value (live or replayed) with its seq.
   */
  async operation<T>(spec: OperationSpec<T>): Promise<T> {
    const { kind, name, execute, options = {} } = spec;
    const began = this.begin(name, kind, spec.fingerprint);
    if (began === null) return never();
    const { seq, row } = began;
    if (row !== undefined) {
      const value = (await this.replayed(row)) as T;
      spec.onRecorded?.(value, seq, false);
      return value;
    }
    validateStepOptions(options);
    if (!(await this.cleared(began))) return never();
    this.active++;
    try {
      const startedAt = this.clock.now();
      // The function runs in a scope of its own: durable operations it calls are journaled inside it.
      const scope: OperationScope = { owner: this, identity: began.identity, key: began.key, calls: new Map() };
      const outcome = await operationScopes.run(scope, () =>
        runAttempts(this.attemptHost, name, seq, execute, options, began.key),
      );
      if (this.stopped) return never();
      let failed = !outcome.ok;
      let error: unknown = outcome.ok ? undefined : outcome.error;
      let output: StoredValue | null = null;
      let extra: WriteOp[] = [];
      if (outcome.ok) {
        try {
          output = toStored(outcome.value, this.where(seq, name));
          extra = spec.alsoWrite?.({ ok: true, value: outcome.value }, seq) ?? [];
        } catch (unstorable) {
          failed = true;
          error = unstorable;
        }
      } else {
        extra = spec.alsoWrite?.({ ok: false, error: outcome.error }, seq) ?? [];
      }
      const step = this.record(began, name, kind, startedAt, failed ? { error } : { output }, outcome.attempts, spec.fingerprint);
      if (!(await this.writeAndDeliver(step, extra))) return never();
      if (failed) throw error;
      const value = (outcome as { value: T }).value;
      spec.onRecorded?.(value, seq, true);
      return value;
    } finally {
      this.settleActive();
    }
  }

  async transaction<T>(name: string, fn: (sql: SqlClient) => Promise<T>): Promise<T> {
    const began = this.begin(name, "transaction");
    if (began === null) return never();
    const { seq, row } = began;
    if (row !== undefined) return (await this.replayed(row)) as T;
    if (!(await this.cleared(began))) return never();
    this.active++;
    const startedAt = this.clock.now();
    // Its SQL commits with this step's checkpoint: an operation journaled inside would commit apart.
    const scope: OperationScope = { owner: this, identity: began.identity, key: began.key, calls: new Map(), refuse: "ctx.transaction" };
    let reserved: number | null = null;
    try {
      let value: T | undefined;
      try {
        await this.store.transaction(this.fence, async (sql) => {
          value = await operationScopes.run(scope, () => fn(sql));
          const output = toStored(value, this.where(seq, name));
          reserved = this.order.reserve();
          return this.record(began, name, "transaction", startedAt, { output }, 1, undefined, reserved);
        });
        if (this.stopped || !(await this.delivered(reserved))) return never();
        return value as T;
      } catch (error) {
        if (reserved !== null) this.order.release(reserved);
        if (error instanceof FencedError) return this.lostNever();
        if (this.stopped) return never();
        // The database failed (not the user's code or SQL): reload and try again, record nothing.
        if (isTransientStoreError(error)) return this.storeFailed(error);
        // The user's writes were rolled back; the failure itself is recorded so replay rethrows it.
        const thrown = storableThrown(error, this.where(seq, name));
        const step = this.record(began, name, "transaction", startedAt, { error: thrown }, 1);
        if (!(await this.writeAndDeliver(step))) return never();
        throw thrown;
      }
    } finally {
      this.settleActive();
    }
  }

  sleep(name: string, delayMs: number): Promise<void> {
    if (!Number.isFinite(delayMs) || delayMs < 0) {
      throw new InvalidSpecError("delayMs", delayMs, `ctx.sleep("${name}") needs a finite number of milliseconds ≥ 0`);
    }
    return this.timer(name, () => this.clock.now() + delayMs);
  }

  sleepUntil(name: string, until: Date | number): Promise<void> {
    const time = typeof until === "number" ? until : until.getTime();
    if (!Number.isFinite(time)) throw new InvalidSpecError("until", until, `ctx.sleepUntil("${name}") needs a valid date`);
    return this.timer(name, () => time);
  }

  now(): Promise<number> {
    return this.recordValue("now", () => this.clock.now());
  }

  random(): Promise<number> {
    return this.recordValue("random", () => Math.random());
  }

  uuid(): Promise<string> {
    return this.recordValue("uuid", () => randomUUID());
  }

  async send(runId: string, topic: string, value: unknown): Promise<void> {
    validateRunId(runId);
    validateTopic(topic);
    assertUserSend(topic);
    const began = this.begin(topic, "send");
    if (began === null) return never();
    const { seq, row } = began;
    if (row !== undefined) {
      await this.replayed(row);
      return;
    }
    if (!(await this.cleared(began))) return never();
    const now = this.clock.now();
    const message: WriteOp = {
      type: "message",
      message: { id: `${this.runId}:${seq}`, runId, topic, body: toStored(value, this.where(seq, topic)), sender: this.runId, createdAt: now },
    };
    const step = this.record(began, topic, "send", now, { output: toStored(runId, "") }, 1);
    this.active++;
    try {
      if (!(await this.writeAndDeliver(step, [message], () => this.host.poke()))) return never();
    } catch (error) {
      if (!(error instanceof RunNotFoundError)) throw error;
      // The destination does not exist: the commit applied nothing; the refusal is the send's outcome.
      this.order.release(step.completion ?? -1);
      const failed = this.record(began, topic, "send", now, { error }, 1);
      if (!(await this.writeAndDeliver(failed))) return never();
      throw error;
    } finally {
      this.settleActive();
    }
  }

  async recv<T = unknown>(topic: string, options: RecvOptions = {}): Promise<T | undefined> {
    this.refuseNestedWait("ctx.recv", topic);
    const began = this.begin(topic, "recv");
    if (began === null) return never();
    const { seq, row } = began;
    if (row !== undefined && row.status !== "pending") return (await this.replayed(row)) as T | undefined;
    if (options.timeoutMs !== undefined && (!Number.isFinite(options.timeoutMs) || options.timeoutMs < 0)) {
      throw new InvalidSpecError("timeoutMs", options.timeoutMs, `ctx.recv("${topic}") needs a finite timeout ≥ 0`);
    }
    if (!(await this.cleared(began))) return never();
    const now = this.clock.now();
    const deadline =
      row !== undefined ? (JSON.parse(row.output ?? "null") as number | null) : options.timeoutMs === undefined ? null : now + options.timeoutMs;
    this.active++;
    const completion = this.order.reserve();
    try {
      const result = await this.store.receive(this.fence, { runId: this.runId, seq, name: topic, topic, now, deadline, path: began.path, completion });
      if (result.status === "waiting") {
        this.order.release(completion);
        return this.waitFor(seq, { wakeAt: result.deadline, topic, childRunId: null });
      }
      if (!(await this.delivered(completion))) return never();
      return result.status === "received" ? (fromStored(result.text) as T) : undefined;
    } catch (error) {
      this.order.release(completion);
      if (error instanceof FencedError) return this.lostNever();
      return this.storeFailed(error);
    } finally {
      this.settleActive();
    }
  }

  async setEvent(key: string, value: unknown): Promise<void> {
    validateName("event key", key);
    const began = this.begin(key, "event");
    if (began === null) return never();
    const { seq, row } = began;
    if (row !== undefined) {
      await this.replayed(row);
      return;
    }
    if (!(await this.cleared(began))) return never();
    const now = this.clock.now();
    const stored = toStored(value, this.where(seq, key));
    // The value rides on the step too: a fork that inherits this step gets this value (see FORK_EVENTS).
    const step = this.record(began, key, "event", now, { output: stored }, 1);
    this.active++;
    try {
      if (!(await this.writeAndDeliver(step, [{ type: "event", runId: this.runId, key, value: stored, at: now }]))) return never();
    } finally {
      this.settleActive();
    }
  }

  async child<Input, Output>(
    workflow: ChildWorkflow<Input, Output>,
    input: Input,
    options: ChildOptions = {},
  ): Promise<ChildHandle<Output>> {
    if (options.id !== undefined) validateRunId(options.id, "id");
    const began = this.begin(workflow.name, "child");
    if (began === null) return never();
    const { seq, row } = began;
    let childId: string;
    if (row !== undefined) {
      childId = (await this.replayed(row)) as string;
    } else {
      if (!(await this.cleared(began))) return never();
      childId = options.id ?? `${this.runId}:${seq}`;
      if (options.id !== undefined) {
        // A chosen id must be new (or this run's own child from before a crash): a child's end wakes
        // only its parent, so adopting someone else's run would wait forever.
        const existing = await this.store.getRun(options.id);
        if (existing !== undefined && existing.parentId !== this.runId) {
          throw new InvalidSpecError("id", options.id, "a run with this id already exists and is not a child of this run; choose a new id");
        }
        if (this.stopped) return never();
      }
      const now = this.clock.now();
      const own = options.timeoutMs === undefined ? null : now + options.timeoutMs;
      const inherited = this.run.deadlineAt;
      const deadlineAt = own === null ? inherited : inherited === null ? own : Math.min(own, inherited);
      const childRun: WriteOp = {
        type: "run",
        run: {
          id: childId,
          workflow: workflow.name,
          status: "enqueued",
          input: toStored(input, `input of child ${childId}`),
          parentId: this.runId,
          parentSeq: seq,
          rootId: this.run.rootId,
          appVersion: this.run.appVersion,
          executorId: null,
          deadlineAt,
          createdAt: now,
          forkedFrom: null,
          forkedFromSeq: null,
        },
      };
      const step = this.record(began, workflow.name, "child", now, { output: toStored(childId, "") }, 1);
      this.active++;
      try {
        if (!(await this.writeAndDeliver(step, [childRun], () => this.host.poke()))) return never();
      } finally {
        this.settleActive();
      }
    }
    return { id: childId, result: () => this.childResult<Output>(childId) };
  }

  async patched(name: string): Promise<boolean> {
    if (this.stopped) return never();
    // A run replaying code from before the patch has no record of it here: it went past this point
    // under the old code, and keeps the old path (taking no identity, so nothing after it shifts).
    if (this.peek("patch", name) === undefined && this.replayingHere) return false;
    const began = this.begin(name, "patch");
    if (began === null) return never();
    if (began.row !== undefined) {
      await this.replayed(began.row);
      return true;
    }
    if (!this.live()) return never();
    const step = this.record(began, name, "patch", this.clock.now(), { output: toStored(true, "") }, 1);
    this.active++;
    try {
      if (!(await this.writeAndDeliver(step))) return never();
      return true;
    } finally {
      this.settleActive();
    }
  }

  // ---- the machinery ----------------------------------------------------------------------------

  /**
   * Takes the next position in the caller's scope (synchronously, so operations called in the same
   * order number the same way on every replay) and looks up the journal's record at that path.
   * Returns null if the record contradicts the call: the run has then been failed with a
   * NonDeterminismError naming both.
   */
  private begin(name: string, kind: StepKind, fingerprint?: string): Began | null {
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
      row,
      nested,
      clearance: row === undefined && !this.journal.empty ? this.journal.clearance(scope.identity, kind, name) : null,
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
  private async cleared(began: Began): Promise<boolean> {
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
  private refuseNestedWait(what: string, name: string): void {
    if (this.scope() === this.topScope) return;
    throw new InvalidSpecError(
      "operation",
      `${what} "${name}"`,
      `${what} cannot wait inside a step's or tool's function (run ${this.runId}): the step keeps the run loaded, and ` +
        "this wait ends only when the run unloads and is woken; call it from the workflow itself",
    );
  }

  /** The scope the caller runs in: its enclosing operation's, or the workflow's top. */
  private scope(): OperationScope {
    const scope = operationScopes.getStore();
    return scope !== undefined && scope.owner === this ? scope : this.topScope;
  }

  /** Hands a recorded outcome to the workflow at its turn: its value, or its error thrown. */
  private async replayed(row: StepRow): Promise<unknown> {
    if (!(await this.delivered(row.completion))) return never();
    return this.replay(row);
  }

  /** Waits for this outcome's turn (see CompletionOrder); false if the run stopped meanwhile. */
  private delivered(completion: number | null): Promise<boolean> | boolean {
    const turn = this.order.deliver(completion);
    // The common case — its turn, now — costs no promise.
    return turn === null ? this.handedOver() : turn.then(() => this.handedOver());
  }

  private handedOver(): boolean {
    this.scheduleSuspendCheck();
    return !this.stopped;
  }

  private replay(row: StepRow): unknown {
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

  /** Whether new work may start: not stopped, deadline not passed. */
  private live(): boolean {
    if (this.stopped) return false;
    const deadline = this.run.deadlineAt;
    if (deadline !== null && this.clock.now() >= deadline) {
      void this.timeOut();
      return false;
    }
    return true;
  }

  private armDeadline(): void {
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

  private async timer(name: string, wakeTime: () => number): Promise<void> {
    const began = this.begin(name, "sleep");
    if (began === null) return never();
    const { seq, row } = began;
    if (row?.completion != null) {
      await this.replayed(row);
      return;
    }
    if (row !== undefined) return this.sleepTo(began, fromStored(row.output) as number);
    if (!(await this.cleared(began))) return never();
    const wakeAt = wakeTime();
    const now = this.clock.now();
    // The wake-up time is recorded now; when the sleep ends is recorded when it does (see sleepTo).
    const step = this.record(began, name, "sleep", now, { output: toStored(wakeAt, "") }, 1, undefined, null);
    this.active++;
    try {
      if (!(await this.write([{ type: "step", step }]))) return never();
    } finally {
      this.settleActive();
    }
    return this.sleepTo({ ...began, seq }, wakeAt);
  }

  /** Ends a recorded sleep whose time has come (recording when), or waits for it durably. */
  private async sleepTo(began: Began, wakeAt: number): Promise<void> {
    if (this.clock.now() < wakeAt) {
      if (!began.nested) return this.waitFor(began.seq, { wakeAt, topic: null, childRunId: null });
      // Inside a step the run stays loaded anyway: sleep in memory (a crash re-runs the step, whose
      // replay of this sleep then waits only for what remains).
      this.active++;
      try {
        await this.clock.sleep(wakeAt - this.clock.now(), this.stopSignal.signal);
      } catch {
        return never();
      } finally {
        this.settleActive();
      }
    }
    if (!this.live()) return never();
    this.active++;
    try {
      const completion = this.order.reserve();
      if (!(await this.write([{ type: "completion", runId: this.runId, seq: began.seq, completion }]))) return never();
      if (!(await this.delivered(completion))) return never();
    } finally {
      this.settleActive();
    }
  }

  private async childResult<Output>(childId: string): Promise<Output> {
    this.refuseNestedWait("a child's result()", childId);
    const began = this.begin(childId, "child-result");
    if (began === null) return never();
    const { seq, row } = began;
    if (row !== undefined) return (await this.replayed(row)) as Output;
    if (!(await this.cleared(began))) return never();
    this.active++;
    try {
      let child: RunRow | undefined;
      try {
        child = await this.store.getRun(childId);
      } catch (error) {
        return this.storeFailed(error);
      }
      if (child === undefined) throw new RunNotFoundError(childId);
      if (child.status === "succeeded" || child.status === "failed" || child.status === "cancelled") {
        const now = this.clock.now();
        const outcome = child.status === "succeeded" ? { output: storedText(child.output ?? '{"$c":"undefined"}') } : { errorText: child.error };
        const step = this.record(began, childId, "child-result", now, outcome, 1);
        if (!(await this.writeAndDeliver(step))) return never();
        return this.replay({ ...toRow(step), output: child.output }) as Output;
      }
      // A fork waits on its original's children: their end wakes the original, not the fork, so the
      // fork looks again every few seconds instead.
      const wakeAt = child.parentId === this.runId ? null : this.clock.now() + FOREIGN_CHILD_POLL_MS;
      return this.waitFor(seq, { wakeAt, topic: null, childRunId: childId });
    } finally {
      this.settleActive();
    }
  }

  private async recordValue<T>(kind: "now" | "random" | "uuid", produce: () => T): Promise<T> {
    const began = this.begin(kind, kind);
    if (began === null) return never();
    const { row } = began;
    if (row !== undefined) return (await this.replayed(row)) as T;
    if (!(await this.cleared(began))) return never();
    const value = produce();
    const step = this.record(began, kind, kind, this.clock.now(), { output: toStored(value, "") }, 1);
    this.active++;
    try {
      if (!(await this.writeAndDeliver(step))) return never();
      return value;
    } finally {
      this.settleActive();
    }
  }

  /** A durable wait: never settles here; the run unloads once nothing else is in flight. */
  private waitFor<T>(seq: number, wait: Wait): Promise<T> {
    this.waits.set(seq, wait);
    this.scheduleSuspendCheck();
    return never();
  }

  private settleActive(): void {
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
  private async settle(status: "succeeded" | "failed", value: unknown): Promise<void> {
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

  /** Commits ops under this run's fence; false means the run was lost (and is now released). */
  private async write(ops: WriteOp[]): Promise<boolean> {
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

  /** Writes a step's record with `also` in one commit, then waits for its turn to be handed over. */
  private async writeAndDeliver(step: StepRecord, also: WriteOp[] = [], afterWrite?: () => void): Promise<boolean> {
    if (!(await this.write(also.length === 0 ? [{ type: "step", step }] : [...also, { type: "step", step }]))) return false;
    afterWrite?.();
    return this.delivered(step.completion ?? null);
  }

  private stop(reason: unknown): void {
    this.stopped = true;
    this.order.close();
    this.stopSignal.abort(reason);
  }

  /** A store call failed under this run: let the executor load it again later; nothing is recorded. */
  private storeFailed<T>(error: unknown): Promise<T> {
    if (!this.stopped) {
      this.stop(error);
      this.host.released(this.runId, "store-error", error);
    }
    return never();
  }

  private lostNever<T>(): Promise<T> {
    this.lost();
    return never();
  }

  /**
   * A journal record for the operation `began` names. Its completion ordinal is taken now, unless
   * given (null: a record whose outcome the workflow does not see yet, a sleep's start).
   */
  private record(
    began: Began,
    name: string,
    kind: StepKind,
    startedAt: number,
    outcome: { output?: StoredValue | null; error?: unknown; errorText?: string | null },
    attempts: number,
    fingerprint?: string,
    completion: number | null = this.order.reserve(),
  ): StepRecord {
    const failed = "error" in outcome || outcome.errorText !== undefined;
    return {
      runId: this.runId,
      seq: began.seq,
      name,
      kind,
      status: failed ? "failed" : "succeeded",
      output: failed ? null : (outcome.output ?? null),
      error: outcome.errorText !== undefined ? (outcome.errorText ?? errorText(new Error("unknown error"))) : failed ? errorText(outcome.error) : null,
      startedAt,
      finishedAt: this.clock.now(),
      attempts,
      path: began.path,
      completion,
      fingerprint: fingerprint ?? null,
    };
  }

  private where(seq: number, name: string): string {
    return `run ${this.runId} seq ${seq} ("${name}")`;
  }
}

function toRow(step: StepRecord): StepRow {
  return {
    ...step,
    output: step.output?.text ?? null,
    outputHash: step.output?.hash ?? null,
    storedPath: step.path ?? null,
    completion: step.completion ?? null,
    fingerprint: step.fingerprint ?? null,
  };
}


function validateStepOptions(options: StepOptions): void {
  const { retries, timeoutMs } = options;
  if (retries !== undefined && (!Number.isInteger(retries) || retries < 0)) {
    throw new InvalidSpecError("retries", retries, "must be an integer ≥ 0");
  }
  if (timeoutMs !== undefined && (!Number.isFinite(timeoutMs) || timeoutMs <= 0)) {
    throw new InvalidSpecError("timeoutMs", timeoutMs, "must be a number of milliseconds > 0");
  }
}

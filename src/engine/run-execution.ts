import { randomUUID } from "node:crypto";
import { FencedError, InvalidSpecError, NonDeterminismError, RunNotFoundError, TimeoutError } from "../errors.js";
import { hashText } from "../store/codec.js";
import { INLINE_LIMIT } from "../store/migrations.js";
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
import { errorFromText, errorText, fromStored, toStored } from "./values.js";

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
  execute: (call: StepCall & { seq: number }) => Promise<T> | T;
  options?: StepOptions;
  /** Rows to commit together with the checkpoint (a model call's record, a budget charge). */
  alsoWrite?: (outcome: { ok: true; value: T } | { ok: false; error: unknown }, seq: number) => WriteOp[];
  onRecorded?: (value: T, seq: number, live: boolean) => void;
}


/** How often a run waiting on a child that is not its own (a fork's inherited child) looks again. */
const FOREIGN_CHILD_POLL_MS = 2_000;

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
  private seqCounter = 0;
  private readonly journal = new Map<number, StepRow>();
  private active = 0;
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
  ) {
    this.runId = run.id;
    this.workflowName = run.workflow;
    this.fence = { runId: run.id, executorId: host.executorId };
    this.attemptHost = { runId: run.id, clock: host.clock, stopSignal: this.stopSignal.signal, stopped: () => this.stopped };
    for (const row of journal) this.journal.set(row.seq, row);
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

  /** The journal's record at the next seq, if any: lets a layer above tell replay from live. */
  peek(): StepRow | undefined {
    return this.journal.get(this.seqCounter);
  }

  /** Runs the workflow to its end (or until it unloads) and records the outcome. */
  async execute(): Promise<void> {
    this.armDeadline();
    if (!this.live()) return;
    let output: unknown;
    try {
      output = await this.fn(this, fromStored(this.run.input) as never);
    } catch (error) {
      if (!this.stopped) await this.settle("failed", error);
      return;
    }
    if (!this.stopped) await this.settle("succeeded", output);
  }

  /** The executor learned this run was cancelled or taken over: stop at once, write nothing. */
  lost(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.stopSignal.abort(new FencedError(`run ${this.runId} is no longer owned by this executor`, { runId: this.runId }));
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
    const recorded = this.begin(name, kind);
    if (recorded === null) return never();
    const { seq, row } = recorded;
    if (row !== undefined) {
      const value = this.replay(row) as T;
      spec.onRecorded?.(value, seq, false);
      return value;
    }
    validateStepOptions(options);
    if (!this.live()) return never();
    this.active++;
    try {
      const startedAt = this.clock.now();
      const outcome = await runAttempts(this.attemptHost, name, seq, execute, options);
      if (this.stopped) return never();
      let error: unknown = outcome.ok ? undefined : outcome.error;
      let output: StoredValue | null = null;
      let extra: WriteOp[] = [];
      if (outcome.ok) {
        try {
          output = toStored(outcome.value, this.where(seq, name));
          extra = spec.alsoWrite?.({ ok: true, value: outcome.value }, seq) ?? [];
        } catch (unstorable) {
          error = unstorable;
        }
      } else {
        extra = spec.alsoWrite?.({ ok: false, error: outcome.error }, seq) ?? [];
      }
      const failed = error !== undefined || !outcome.ok;
      const step = this.record(seq, name, kind, startedAt, failed ? { error } : { output }, outcome.attempts);
      if (!(await this.write([{ type: "step", step }, ...extra]))) return never();
      if (failed) throw error;
      const value = (outcome as { value: T }).value;
      spec.onRecorded?.(value, seq, true);
      return value;
    } finally {
      this.settleActive();
    }
  }

  async transaction<T>(name: string, fn: (sql: SqlClient) => Promise<T>): Promise<T> {
    const recorded = this.begin(name, "transaction");
    if (recorded === null) return never();
    const { seq, row } = recorded;
    if (row !== undefined) return this.replay(row) as T;
    if (!this.live()) return never();
    this.active++;
    const startedAt = this.clock.now();
    try {
      let value: T | undefined;
      try {
        await this.store.transaction(this.fence, async (sql) => {
          value = await fn(sql);
          return this.record(seq, name, "transaction", startedAt, { output: toStored(value, this.where(seq, name)) }, 1);
        });
        return value as T;
      } catch (error) {
        if (error instanceof FencedError) return this.lostNever();
        if (this.stopped) return never();
        // The database failed (not the user's code or SQL): reload and try again, record nothing.
        if (isTransientStoreError(error)) return this.storeFailed(error);
        // The user's writes were rolled back; the failure itself is recorded so replay rethrows it.
        const step = this.record(seq, name, "transaction", startedAt, { error }, 1);
        if (!(await this.write([{ type: "step", step }]))) return never();
        throw error;
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
    const recorded = this.begin(topic, "send");
    if (recorded === null) return never();
    const { seq, row } = recorded;
    if (row !== undefined) return;
    if (!this.live()) return never();
    const now = this.clock.now();
    const message: WriteOp = {
      type: "message",
      message: { id: `${this.runId}:${seq}`, runId, topic, body: toStored(value, this.where(seq, topic)), sender: this.runId, createdAt: now },
    };
    const step = this.record(seq, topic, "send", now, { output: toStored(runId, "") }, 1);
    this.active++;
    try {
      if (!(await this.write([message, { type: "step", step }]))) return never();
      this.host.poke();
    } finally {
      this.settleActive();
    }
  }

  async recv<T = unknown>(topic: string, options: RecvOptions = {}): Promise<T | undefined> {
    const recorded = this.begin(topic, "recv");
    if (recorded === null) return never();
    const { seq, row } = recorded;
    if (row !== undefined && row.status !== "pending") return this.replay(row) as T | undefined;
    if (options.timeoutMs !== undefined && (!Number.isFinite(options.timeoutMs) || options.timeoutMs < 0)) {
      throw new InvalidSpecError("timeoutMs", options.timeoutMs, `ctx.recv("${topic}") needs a finite timeout ≥ 0`);
    }
    if (!this.live()) return never();
    const now = this.clock.now();
    const deadline =
      row !== undefined ? (JSON.parse(row.output ?? "null") as number | null) : options.timeoutMs === undefined ? null : now + options.timeoutMs;
    this.active++;
    try {
      const result = await this.store.receive(this.fence, { runId: this.runId, seq, name: topic, topic, now, deadline });
      if (result.status === "received") return fromStored(result.text) as T;
      if (result.status === "timed-out") return undefined;
      return this.waitFor(seq, { wakeAt: result.deadline, topic, childRunId: null });
    } catch (error) {
      if (error instanceof FencedError) return this.lostNever();
      return this.storeFailed(error);
    } finally {
      this.settleActive();
    }
  }

  async setEvent(key: string, value: unknown): Promise<void> {
    const recorded = this.begin(key, "event");
    if (recorded === null) return never();
    const { seq, row } = recorded;
    if (row !== undefined) return;
    if (!this.live()) return never();
    const now = this.clock.now();
    const stored = toStored(value, this.where(seq, key));
    const step = this.record(seq, key, "event", now, { output: null }, 1);
    this.active++;
    try {
      if (!(await this.write([{ type: "event", runId: this.runId, key, value: stored, at: now }, { type: "step", step }]))) {
        return never();
      }
    } finally {
      this.settleActive();
    }
  }

  async child<Input, Output>(
    workflow: ChildWorkflow<Input, Output>,
    input: Input,
    options: ChildOptions = {},
  ): Promise<ChildHandle<Output>> {
    const recorded = this.begin(workflow.name, "child");
    if (recorded === null) return never();
    const { seq, row } = recorded;
    let childId: string;
    if (row !== undefined) {
      childId = fromStored(row.output) as string;
    } else {
      if (!this.live()) return never();
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
      const step = this.record(seq, workflow.name, "child", now, { output: toStored(childId, "") }, 1);
      this.active++;
      try {
        if (!(await this.write([childRun, { type: "step", step }]))) return never();
        this.host.poke();
      } finally {
        this.settleActive();
      }
    }
    return { id: childId, result: () => this.childResult<Output>(childId) };
  }

  async patched(name: string): Promise<boolean> {
    if (this.stopped) return never();
    const seq = this.seqCounter;
    const row = this.journal.get(seq);
    if (row !== undefined) {
      if (row.kind !== "patch" || row.name !== name) return false; // recorded under the old code
      this.seqCounter++;
      return true;
    }
    this.seqCounter++;
    if (!this.live()) return never();
    const step = this.record(seq, name, "patch", this.clock.now(), { output: toStored(true, "") }, 1);
    this.active++;
    try {
      if (!(await this.write([{ type: "step", step }]))) return never();
      return true;
    } finally {
      this.settleActive();
    }
  }

  // ---- the machinery ----------------------------------------------------------------------------

  /**
   * Takes the next seq (synchronously, so concurrent operations number the same way on every
   * replay) and checks the journal's record at it. Returns null if the record contradicts the call:
   * the run has then been failed with a NonDeterminismError.
   */
  private begin(name: string, kind: StepKind): { seq: number; row: StepRow | undefined } | null {
    if (this.stopped) return null;
    const seq = this.seqCounter++;
    const row = this.journal.get(seq);
    if (row !== undefined && (row.name !== name || row.kind !== kind)) {
      const error = new NonDeterminismError(
        `run ${this.runId} (workflow "${this.workflowName}") is not deterministic at seq ${seq}: the journal recorded ` +
          `${row.kind} "${row.name}" but the code called ${kind} "${name}". The workflow code changed under an in-flight ` +
          "run, or branches on something not recorded. Route nondeterminism through ctx, guard code changes with " +
          "ctx.patched(name), then `cairn resume` the run.",
        { runId: this.runId, seq },
      );
      void this.settle("failed", error);
      return null;
    }
    return { seq, row };
  }

  private replay(row: StepRow): unknown {
    if (row.status === "failed") throw errorFromText(row.error ?? '{"name":"Error","message":"unknown"}');
    return fromStored(row.output);
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

  private timer(name: string, wakeTime: () => number): Promise<void> {
    const recorded = this.begin(name, "sleep");
    if (recorded === null) return never();
    const { seq, row } = recorded;
    if (row !== undefined) return this.sleepTo(seq, fromStored(row.output) as number);
    if (!this.live()) return never();
    const wakeAt = wakeTime();
    const now = this.clock.now();
    const step = this.record(seq, name, "sleep", now, { output: toStored(wakeAt, "") }, 1);
    this.active++;
    return this.write([{ type: "step", step }])
      .finally(() => this.settleActive())
      .then((ok) => (ok ? this.sleepTo(seq, wakeAt) : never<void>()));
  }

  private sleepTo(seq: number, wakeAt: number): Promise<void> {
    if (this.clock.now() >= wakeAt) return Promise.resolve();
    return this.waitFor(seq, { wakeAt, topic: null, childRunId: null });
  }

  private async childResult<Output>(childId: string): Promise<Output> {
    const recorded = this.begin(childId, "child-result");
    if (recorded === null) return never();
    const { seq, row } = recorded;
    if (row !== undefined) return this.replay(row) as Output;
    if (!this.live()) return never();
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
        const step = this.record(seq, childId, "child-result", now, outcome, 1);
        if (!(await this.write([{ type: "step", step }]))) return never();
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
    const recorded = this.begin(kind, kind);
    if (recorded === null) return never();
    const { seq, row } = recorded;
    if (row !== undefined) return this.replay(row) as T;
    if (!this.live()) return never();
    const value = produce();
    const step = this.record(seq, kind, kind, this.clock.now(), { output: toStored(value, "") }, 1);
    this.active++;
    try {
      if (!(await this.write([{ type: "step", step }]))) return never();
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
      if (!this.stopped && this.active === 0 && this.waits.size > 0) void this.suspend();
    });
  }

  private async suspend(): Promise<void> {
    this.stopped = true;
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
      // The database failed under us: give the run back to the executor to load again later.
      if (!this.stopped) {
        this.stopped = true;
        this.stopSignal.abort(error);
        this.host.released(this.runId, "store-error", error);
      }
      return false;
    }
  }

  /** A store call failed under this run: let the executor load it again later; nothing is recorded. */
  private storeFailed<T>(error: unknown): Promise<T> {
    if (!this.stopped) {
      this.stopped = true;
      this.stopSignal.abort(error);
      this.host.released(this.runId, "store-error", error);
    }
    return never();
  }

  private lostNever<T>(): Promise<T> {
    this.lost();
    return never();
  }

  private record(
    seq: number,
    name: string,
    kind: StepKind,
    startedAt: number,
    outcome: { output?: StoredValue | null; error?: unknown; errorText?: string | null },
    attempts: number,
  ): StepRecord {
    const failed = outcome.error !== undefined || outcome.errorText !== undefined;
    return {
      runId: this.runId,
      seq,
      name,
      kind,
      status: failed ? "failed" : "succeeded",
      output: failed ? null : (outcome.output ?? null),
      error: outcome.errorText !== undefined ? (outcome.errorText ?? errorText(new Error("unknown error"))) : failed ? errorText(outcome.error) : null,
      startedAt,
      finishedAt: this.clock.now(),
      attempts,
    };
  }

  private where(seq: number, name: string): string {
    return `run ${this.runId} seq ${seq} ("${name}")`;
  }
}

function storedText(text: string): StoredValue {
  return { text, hash: text.length > INLINE_LIMIT ? hashText(text) : null };
}

function toRow(step: StepRecord): StepRow {
  return { ...step, output: step.output?.text ?? null, outputHash: step.output?.hash ?? null };
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

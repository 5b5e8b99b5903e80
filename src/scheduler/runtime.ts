import { randomUUID } from "node:crypto";
import type { TracerProvider } from "@opentelemetry/api";
import { CairnError, CancelledError, InvalidSpecError, RunNotFoundError, TimeoutError } from "../errors.js";
import { openStore } from "../store/open-store.js";
import { TERMINAL_STATUSES, type QueryResult, type RunRow, type Store, type WriteOp } from "../store/store.js";
import { retryTransient } from "../store/transient.js";
import { systemClock, type Clock } from "../engine/clock.js";
import type { WorkflowContext } from "../engine/context.js";
import { Executor } from "./executor.js";
import { RunWaiters } from "./run-waiters.js";
import { IsolationPool, type IsolationPoolOptions } from "../engine/isolation/pool.js";
import { assertUserSend } from "../engine/reserved-topics.js";
import { deleteRuns, RetentionPolicy, type RetentionOptions } from "./retention-policy.js";
import type { DeletedRuns, RunDeleteFilter } from "../store/retention.js";
import { validateName, validateRunId, validateTopic, validateWorkflowName } from "../engine/names.js";
import { RunHandle, type RunHost } from "../engine/run-handle.js";
import { DEFAULT_REPLAY_STALL_MS, type WorkflowFunction } from "../engine/run-execution.js";
import { DEFAULT_WARM_RUNS } from "../engine/warm-runs.js";
import { errorText, fromStored, toStored } from "../store/value/index.js";
import { Workflow, type WorkflowHost, type WorkflowOptions } from "../engine/workflow.js";
import type { RunTracing } from "../engine/tracing.js";
import { Queues, type ServeOptions } from "./queues.js";
import type { QueueOptions, QueueSpec } from "./queue-spec.js";
import { checkEnqueue, enqueueRun, type DispatchAtEnqueue, type EnqueueOptions } from "./enqueue.js";
import { QUEUES_EXTENSION } from "./schema/queues-extension.js";

export interface CairnOptions {
  /** A SQLite file path (default "cairn.db", or $CAIRN_DATABASE) or a postgres:// URL. */
  database?: string;
  /**
   * The application version runs are recorded under; an executor recovers only its own version's
   * runs. Default $CAIRN_APP_VERSION, else "default" — so without naming one, every process
   * recovers every run, and an incompatible code change surfaces as a NonDeterminismError.
   */
  appVersion?: string;
  /** Recover runs of every version. Default false. */
  recoverAllVersions?: boolean;
  /** SQLite durability. Default "FULL". */
  synchronous?: "FULL" | "NORMAL" | "OFF";
  /**
   * PostgreSQL: a connection whose server has not answered one of Cairn's statements for this long
   * (a frozen backend, a half-open connection) is dropped, and the statement fails as a lost
   * connection's would. Default 30_000.
   */
  answerTimeoutMs?: number;
  /** Default 15_000. An executor silent this long is presumed dead and its runs are taken over. */
  leaseMs?: number;
  /** How often to look for work written by other processes. Default 200 (SQLite), 500 (PostgreSQL). */
  pollIntervalMs?: number;
  /** Default 1000. */
  maxConcurrentRuns?: number;
  /**
   * A run taken over by a new executor more than this many times (since it was created or last
   * resumed) without finishing is a poison run — it crashes or stalls whatever runs it — and is
   * parked as failed with a PoisonRunError (code "POISON_RUN") for a person to `cairn resume`.
   * Default 10.
   */
  maxRecoveryAttempts?: number;
  clock?: Clock;
  /** Where errors that belong to no caller go (a failed poll). Default: console.error. */
  onError?: (error: unknown) => void;
  /** Use this store instead of opening `database`. */
  store?: Store;
  /**
   * How long replay waits for the workflow to call the operation whose recorded outcome comes next
   * before it fails the run with a NonDeterminismError (docs/replay.md). Default 30_000.
   */
  replayStallMs?: number;
  /**
   * A secret (≥ 16 bytes; default $CAIRN_APPROVAL_KEY) for signed approvals: this Cairn signs the
   * decisions it makes (HMAC-SHA256), and its runs act only on decisions signed with it. Give the
   * same key to every process that runs agents or decides approvals.
   */
  approvalKey?: string | Uint8Array;
  /** Delete finished runs after a while (applied in small batches by the executor). Default: keep everything. */
  retention?: RetentionOptions;
  /** The warm pool isolated steps run in (`{ isolation: "process" }`, docs/isolation.md). Default `{ poolSize: 2 }`. */
  isolation?: IsolationPoolOptions;
  /**
   * Where Cairn's spans go (README, "OpenTelemetry"). Default: the global tracer provider of
   * `@opentelemetry/api`, which records nothing until the application registers an SDK. Cairn never
   * registers or replaces one.
   */
  tracerProvider?: TracerProvider;
  /** The queues and partitions this process's executor serves (README, "Queues"). Default: every queue declared here. */
  serve?: ServeOptions;
  /**
   * Warm runs (README, "Warm runs"): up to `maxRuns` runs that unloaded to wait (a sleep, a
   * receive, a select, a child's result) stay in this executor's memory, and when one is claimed
   * here again with its journal unchanged it continues from there instead of replaying its journal.
   * Each costs what it held while loaded (the journal rows it was loaded with, the workflow's
   * variables); runs beyond the bound, and every run with `maxRuns: 0`, cost no memory while they
   * wait. Default `{ maxRuns: 100 }`.
   */
  warmRuns?: { maxRuns?: number };
}

export interface ForkOptions {
  /** The journal entries below this seq are reused; execution resumes at it. */
  fromSeq: number;
  /** The new run's id. Default: a UUID. */
  id?: string;
}

export interface SendOptions {
  /** Deduplicates: a second send with the same key inserts nothing. Default: a UUID (no dedup). */
  idempotencyKey?: string;
}

/**
 * The runtime behind a `Cairn` (which composes it with the agents layer and exposes only the
 * documented API): a registry of workflows, a system database, and (after `launch`) an executor
 * that runs them. Several Cairn instances — in one process, many processes or many machines — can
 * share one database. Internal: reached through `runtimeOf(cairn)` (src/internal.ts).
 */
export class CairnRuntime implements WorkflowHost, RunHost {
  readonly database: string;
  readonly appVersion: string;
  readonly clock: Clock;
  private readonly storeInstance: Store;
  private readonly workflows = new Map<string, WorkflowFunction>();
  /** The workflows registered with `deferFinishFsync` (the executor asks, see ExecutionHost.finishDefers). */
  private readonly deferredFinishes = new Set<string>();
  private readonly executor: Executor;
  private readonly waiters: RunWaiters;
  private migrated: Promise<void> | null = null;
  private closed = false;
  private readonly retention: RetentionPolicy | null;
  /** Isolated steps' processes: none until the first isolated step, all killed by `shutdown`. */
  private readonly isolation: IsolationPool;
  private readonly queues: Queues;

  private readonly tracing: RunTracing | undefined;
  private readonly leaseMs: number;

  /** `layers.tracing`: the tracer runs report to (the face builds the OpenTelemetry one). */
  constructor(options: CairnOptions = {}, layers: { tracing?: RunTracing } = {}) {
    this.tracing = layers.tracing;
    this.database = options.database ?? process.env.CAIRN_DATABASE ?? "cairn.db";
    this.appVersion = options.appVersion ?? process.env.CAIRN_APP_VERSION ?? "default";
    this.clock = options.clock ?? systemClock;
    const leaseMs = options.leaseMs ?? 15_000;
    if (!Number.isFinite(leaseMs) || leaseMs <= 0) throw new InvalidSpecError("leaseMs", leaseMs, "must be > 0");
    this.leaseMs = leaseMs;
    const warmRuns = warmRunsBound(options.warmRuns);
    // Before the store opens: a bad option leaves nothing open. No process starts until first use.
    this.isolation = new IsolationPool(options.isolation);
    this.storeInstance =
      options.store ??
      openStore(this.database, {
        ...(options.synchronous === undefined ? {} : { synchronous: options.synchronous }),
        ...(options.answerTimeoutMs === undefined ? {} : { answerTimeoutMs: options.answerTimeoutMs }),
      });
    const pollIntervalMs = options.pollIntervalMs ?? (this.storeInstance.backend === "postgres" ? 500 : 200);
    if (!Number.isFinite(pollIntervalMs) || pollIntervalMs <= 0) {
      throw new InvalidSpecError("pollIntervalMs", pollIntervalMs, "must be > 0");
    }
    const maxRecoveryAttempts = options.maxRecoveryAttempts ?? 10;
    if (!Number.isInteger(maxRecoveryAttempts) || maxRecoveryAttempts < 0) {
      throw new InvalidSpecError("maxRecoveryAttempts", maxRecoveryAttempts, "must be an integer ≥ 0");
    }
    // The scheduler's own tables (queues, the Task table) come through the extension contract.
    this.storeInstance.register(QUEUES_EXTENSION);
    this.queues = new Queues(this.storeInstance, options.serve);
    this.executor = new Executor(this.storeInstance, this.clock, this.workflows, {
      isolation: this.isolation,
      queues: this.queues,
      appVersion: this.appVersion,
      recoverAllVersions: options.recoverAllVersions ?? false,
      leaseMs,
      pollIntervalMs,
      maxConcurrentRuns: options.maxConcurrentRuns ?? 1000,
      deferredFinishes: this.deferredFinishes,
      replayStallMs: positiveMs("replayStallMs", options.replayStallMs ?? DEFAULT_REPLAY_STALL_MS),
      maxRecoveryAttempts,
      onError: options.onError ?? ((error) => console.error("[cairn]", error)),
      ...(options.retention === undefined ? {} : { maintenance: () => this.retention?.tick() }),
      ...(layers.tracing === undefined ? {} : { tracing: layers.tracing }),
      warmRuns,
    });
    this.waiters = new RunWaiters((ids) => this.storeInstance.getRuns(ids));
    this.retention =
      options.retention === undefined
        ? null
        : new RetentionPolicy(this.storeInstance, this.clock, options.retention, options.onError ?? ((error) => console.error("[cairn]", error)));
  }

  /** The system database, with every method (writes included): for the layers above and the tests, never for users. */
  store(): Store {
    return this.storeInstance;
  }

  /** `cairn.runs.delete(filter)`: see RunDeleteFilter. */
  async deleteRuns(filter: RunDeleteFilter): Promise<DeletedRuns> {
    return deleteRuns(await this.readyStore(), filter);
  }

  /** `cairn.runs.gc()`: sweeps every payload no row names. */
  async collectPayloads(): Promise<number> {
    return (await this.readyStore()).collectPayloads();
  }

  /** `cairn.query(sql, params)`: one statement the database runs read-only (see Store.query). */
  async query(sql: string, params: unknown[] = []): Promise<QueryResult> {
    if (typeof sql !== "string" || sql.trim() === "") throw new InvalidSpecError("sql", sql, "give one SELECT (or WITH ... SELECT) statement");
    if (!Array.isArray(params)) throw new InvalidSpecError("params", params, "must be an array of values for $1, $2, ...");
    return (await this.readyStore()).query(sql, params);
  }

  get executorId(): string {
    return this.executor.executorId;
  }

  /** Registers a workflow under a unique name. Register every workflow before `launch`. */
  workflow<Input, Output>(
    name: string,
    fn: (ctx: WorkflowContext, input: Input) => Promise<Output>,
    options: WorkflowOptions<Input> = {},
  ): Workflow<Input, Output> {
    validateWorkflowName(name);
    if (this.workflows.has(name)) throw new InvalidSpecError("name", name, "a workflow with this name is already registered");
    if (typeof fn !== "function") throw new InvalidSpecError("fn", fn, `workflow "${name}" needs a function`);
    const deferFinish = options.deferFinishFsync;
    if (deferFinish !== undefined && typeof deferFinish !== "boolean") {
      throw new InvalidSpecError("deferFinishFsync", deferFinish, `workflow "${name}": deferFinishFsync must be true or false`);
    }
    this.workflows.set(name, fn as WorkflowFunction);
    if (deferFinish === true) this.deferredFinishes.add(name);
    return new Workflow(this, name, fn, options);
  }

  /**
   * Declares a queue (see QueueOptions) and stores it; this process's executor serves it and
   * dispatches it. Declare queues before `launch`, like workflows.
   */
  queue(name: string, options: QueueOptions = {}): void {
    if (this.executor.running) throw new InvalidSpecError("name", name, "declare queues before launch()");
    this.queues.declare(name, options);
  }

  async enqueueRun(workflow: string, queueName: string, input: unknown, options: EnqueueOptions): Promise<RunHandle> {
    const queue = this.queues.get(queueName);
    if (queue === undefined) {
      throw new InvalidSpecError(
        "queue",
        queueName,
        "no queue of this name is declared in this process: declare it with cairn.queue(name, options) first",
      );
    }
    const id = options.id ?? randomUUID();
    validateRunId(id, "id");
    const now = this.clock.now();
    const checked = checkEnqueue(queue, input, options, now);
    await this.ready();
    await this.queues.sync(now);
    const stored = toStored(input, `input of workflow "${workflow}"`);
    const { runId, created } = await enqueueRun(
      this.storeInstance,
      queue,
      {
        id,
        workflow,
        status: "enqueued",
        input: stored,
        parentId: null,
        parentSeq: null,
        rootId: id,
        appVersion: this.appVersion,
        executorId: null,
        deadlineAt: options.timeoutMs === undefined ? null : now + options.timeoutMs,
        createdAt: now,
        forkedFrom: null,
        forkedFromSeq: null,
      },
      checked,
      // The caller's trace context, kept with the run in the enqueue's commit (as startRun does).
      () => this.tracing?.starting(id, workflow) ?? [],
      this.dispatchAtEnqueue(queue, now),
    );
    // A run this enqueue created is the caller's; one that was there already may be another
    // workflow's (same id or dedup key): read it to say so (a round trip PostgreSQL's enqueue skips).
    const row = created ? null : await this.mustGetRun(runId);
    if (row !== null && row.workflow !== workflow) {
      throw new InvalidSpecError(
        options.dedupKey !== undefined && runId !== id ? "dedupKey" : "id",
        options.dedupKey ?? id,
        `that key already belongs to a run of workflow "${row.workflow}"`,
      );
    }
    // PostgreSQL: the enqueue's NOTIFY wakes the executor it concerns, this one included (a dispatch
    // naming it, or a queue's wake-up); a claiming pass here too would claim and read for nothing.
    if (this.storeInstance.capabilities.wakeNotifications === null) this.executor.poke();
    return new RunHandle(this, runId);
  }

  /** How an enqueue on `queue` dispatches its run in the same call, where the backend and policy allow (enqueue-function.ts). */
  private dispatchAtEnqueue(queue: QueueSpec, now: number): DispatchAtEnqueue | undefined {
    const call = this.queues.enqueueCall(queue);
    return call === null ? undefined : { call, oldestHeartbeat: now - this.leaseMs };
  }

  /** Whether `workflow` was registered on this runtime (the object `workflow()` returned). */
  isRegistered(workflow: { name: string }): boolean {
    const fn = (workflow as { fn?: unknown }).fn;
    return fn !== undefined && this.workflows.get(workflow.name) === fn;
  }

  /** Migrates the database, registers this executor, and recovers or resumes every run it may. */
  async launch(): Promise<void> {
    await this.ready();
    await this.executor.start();
  }

  /**
   * Stops this executor; its unfinished runs are taken over by the next executor that looks.
   * Returns within about 10 s even when the database is unreachable (what could not be closed
   * then dies with the process).
   */
  async shutdown(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.executor.stop();
    await this.isolation.close();
    await this.retention?.stop();
    await this.storeInstance.close();
    // After the store: a woken waiter's read then fails, rather than finding the run unfinished and waiting on.
    this.waiters.close();
  }

  /** A handle on an existing run (nothing is read until you call a method). */
  run<Output = unknown>(id: string): RunHandle<Output> {
    validateRunId(id, "id");
    return new RunHandle<Output>(this, id);
  }

  async startRun(workflow: string, id: string, input: unknown, timeoutMs: number | undefined): Promise<RunHandle> {
    await this.ready();
    const stored = toStored(input, `input of workflow "${workflow}"`);
    const now = this.clock.now();
    const owned = this.executor.running;
    let rows: Map<string, RunRow>;
    try {
      rows = await this.storeInstance.commitRuns([
        {
          type: "run",
          run: {
            id,
            workflow,
            status: owned ? "running" : "enqueued",
            input: stored,
            parentId: null,
            parentSeq: null,
            rootId: id,
            appVersion: this.appVersion,
            executorId: owned ? this.executor.executorId : null,
            deadlineAt: timeoutMs === undefined ? null : now + timeoutMs,
            createdAt: now,
            forkedFrom: null,
            forkedFromSeq: null,
          },
        },
        // The caller's trace context, kept with the run (a second start of the same id keeps the first's).
        ...(this.tracing?.starting(id, workflow) ?? []),
      ]);
    } catch (error) {
      // The run may be ours and running (a commit whose answer was lost, or a read-back that failed),
      // but not started here: the executor loads it on its next poll, or finds it absent.
      if (owned) this.executor.reloadLater(id);
      throw error;
    }
    const row = rows.get(id);
    if (row === undefined) throw new CairnError(`run ${id} vanished right after it was created`);
    if (row.workflow !== workflow) {
      throw new InvalidSpecError("id", id, `that run id already belongs to a run of workflow "${row.workflow}"`);
    }
    if (owned && row.status === "running" && row.executorId === this.executor.executorId && row.createdAt === now) {
      this.executor.startCreated(row);
    }
    return new RunHandle(this, id);
  }

  /**
   * `workflow.startMany`: every new run in one commit (the store writes them as one statement where
   * it can), which returns their rows (read back on SQLite; on PostgreSQL the insert says which it
   * created). Semantics item by item as `startRun`'s.
   */
  async startRuns(workflow: string, runs: readonly { id: string; input: unknown; timeoutMs: number | undefined }[]): Promise<RunHandle[]> {
    if (runs.length === 0) return [];
    await this.ready();
    const stored = runs.map((r, i) => toStored(r.input, `input of workflow "${workflow}" (items[${i}])`));
    const now = this.clock.now();
    const owned = this.executor.running;
    const ops: WriteOp[] = [];
    const tracing: WriteOp[] = [];
    const seen = new Set<string>();
    runs.forEach((r, i) => {
      // The first item of an id wins, as a second start of that id would find the first's run.
      if (seen.has(r.id)) return;
      seen.add(r.id);
      ops.push({
        type: "run",
        run: {
          id: r.id,
          workflow,
          status: owned ? "running" : "enqueued",
          input: stored[i]!,
          parentId: null,
          parentSeq: null,
          rootId: r.id,
          appVersion: this.appVersion,
          executorId: owned ? this.executor.executorId : null,
          deadlineAt: r.timeoutMs === undefined ? null : now + r.timeoutMs,
          createdAt: now,
          forkedFrom: null,
          forkedFromSeq: null,
        },
      });
      tracing.push(...(this.tracing?.starting(r.id, workflow) ?? []));
    });
    // Runs first, then their trace contexts: the runs-only batch is what the store writes in one statement.
    let byId: Map<string, RunRow>;
    try {
      byId = await this.storeInstance.commitRuns([...ops, ...tracing]);
    } catch (error) {
      if (owned) for (const id of seen) this.executor.reloadLater(id);
      throw error;
    }
    for (const id of seen) {
      const row = byId.get(id);
      if (row === undefined) throw new CairnError(`run ${id} vanished right after it was created`);
      if (owned && row.workflow === workflow && row.status === "running" && row.executorId === this.executor.executorId && row.createdAt === now) {
        this.executor.startCreated(row);
      }
    }
    for (const [i, r] of runs.entries()) {
      const row = byId.get(r.id)!;
      if (row.workflow !== workflow) {
        throw new InvalidSpecError(`items[${i}].options.id`, r.id, `that run id already belongs to a run of workflow "${row.workflow}"`);
      }
    }
    return runs.map((r) => new RunHandle(this, r.id));
  }

  /** Cancels a run and its unfinished descendants; returns the ids cancelled. */
  async cancel(runId: string): Promise<string[]> {
    await this.ready();
    await this.mustGetRun(runId);
    const error = errorText(new CancelledError(`run ${runId} was cancelled`, { runId }));
    const ids = await this.storeInstance.cancelRun(runId, error, this.clock.now());
    this.executor.stopRuns(ids);
    this.executor.poke();
    return ids;
  }

  /** Continues a failed or cancelled run from its journal; false if it was neither. */
  async resume(runId: string): Promise<boolean> {
    await this.ready();
    await this.mustGetRun(runId);
    const resumed = await this.storeInstance.resumeRun(runId, this.clock.now());
    this.executor.warmRuns.forget(runId);
    this.executor.poke();
    return resumed;
  }

  /**
   * A new run of the same workflow and input that reuses the journal of `runId` below `fromSeq`
   * and executes from there: replay a run up to a point, then take a different path.
   */
  async fork<Output = unknown>(runId: string, options: ForkOptions): Promise<RunHandle<Output>> {
    await this.ready();
    const original = await this.mustGetRun(runId);
    if (!Number.isInteger(options.fromSeq) || options.fromSeq < 0) {
      throw new InvalidSpecError("fromSeq", options.fromSeq, "must be an integer ≥ 0");
    }
    const id = options.id ?? randomUUID();
    validateRunId(id, "id");
    await this.storeInstance.forkRun(runId, options.fromSeq, {
      id,
      workflow: original.workflow,
      status: "enqueued",
      input: toStored(fromStored(original.input), `input of fork ${id}`),
      parentId: null,
      parentSeq: null,
      rootId: id,
      appVersion: original.appVersion,
      executorId: null,
      deadlineAt: null,
      createdAt: this.clock.now(),
      forkedFrom: runId,
      forkedFromSeq: options.fromSeq,
    });
    this.executor.poke();
    return new RunHandle<Output>(this, id);
  }

  /**
   * Sends a message to a run from outside any workflow. Failure semantics: committed when this
   * resolves; with an idempotencyKey a retried send inserts nothing. A key is scoped to the
   * destination run: the same key sent to two runs delivers to both.
   */
  async send(runId: string, topic: string, value: unknown, options: SendOptions = {}): Promise<void> {
    validateTopic(topic);
    if (options.idempotencyKey !== undefined) validateName("idempotencyKey", options.idempotencyKey);
    if (options.idempotencyKey !== undefined && (typeof options.idempotencyKey !== "string" || options.idempotencyKey.length === 0)) {
      throw new InvalidSpecError("idempotencyKey", options.idempotencyKey, "must be a non-empty string");
    }
    assertUserSend(topic, options.idempotencyKey);
    await this.ready();
    await this.mustGetRun(runId);
    const now = this.clock.now();
    await this.storeInstance.commit(null, [
      {
        type: "message",
        message: {
          id: options.idempotencyKey === undefined ? randomUUID() : keyedMessageId(runId, options.idempotencyKey),
          runId,
          topic,
          body: toStored(value, `message to ${runId} on "${topic}"`),
          sender: null,
          createdAt: now,
        },
      },
    ]);
    this.executor.poke();
  }

  /** Reads an event a run set with `ctx.setEvent`, waiting up to `timeoutMs` for it to appear. */
  async getEvent<T = unknown>(runId: string, key: string, options: { timeoutMs?: number } = {}): Promise<T | undefined> {
    validateRunId(runId);
    validateName("key", key);
    await this.ready();
    const deadline = Date.now() + (options.timeoutMs ?? 0);
    for (;;) {
      const text = await this.patiently(() => this.storeInstance.getEvent(runId, key), Math.max(deadline, Date.now() + READ_PATIENCE_MS));
      if (text !== undefined) return fromStored(text) as T;
      if (Date.now() >= deadline) return undefined;
      await new Promise((resolve) => setTimeout(resolve, Math.min(50, deadline - Date.now())));
    }
  }

  /** Waits until the run is succeeded, failed or cancelled, and returns its row. */
  async waitForRun(runId: string, options: { timeoutMs?: number } = {}): Promise<RunRow> {
    await this.ready();
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
    for (;;) {
      let wake!: (settled?: RunRow) => void;
      const changed = new Promise<RunRow | undefined>((resolve) => (wake = resolve));
      const unsubscribe = this.executor.onRunChange(runId, wake);
      // Ended in another process: found by the one lookup every waiter here shares (run-waiters.ts).
      const unwatch = this.waiters.watch(runId, wake);
      let timer: NodeJS.Timeout | undefined;
      try {
        // A run executing here ends through the executor, which wakes us with its final row: nothing
        // to read before then (a start's result() used to read the run it had just created).
        // A caller waiting for the end must not hear of a database outage the run itself survives.
        const run = this.executor.executing(runId) ? null : await this.patiently(() => this.mustGetRun(runId), deadline);
        if (run !== null && TERMINAL_STATUSES.includes(run.status)) return run;
        if (Date.now() >= deadline) throw new TimeoutError(`run ${runId} did not finish within ${options.timeoutMs} ms`, { runId });
        const timeUp =
          deadline === Infinity ? null : new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), deadline - Date.now())));
        const settled = await (timeUp === null ? changed : Promise.race([changed, timeUp]));
        // Settled: the row it committed here, or the one the lookup found, without reading it again.
        if (settled !== undefined) return settled;
      } finally {
        clearTimeout(timer);
        unsubscribe();
        unwatch();
      }
    }
  }

  /** The run's row, for `status()`: transient store errors are retried for up to READ_PATIENCE_MS. */
  async readRun(runId: string): Promise<RunRow> {
    await this.ready();
    return this.patiently(() => this.mustGetRun(runId), Date.now() + READ_PATIENCE_MS);
  }

  /** Retries `read` through transient store errors (with backoff) until `giveUpAt` or shutdown. */
  private patiently<T>(read: () => Promise<T>, giveUpAt: number): Promise<T> {
    return retryTransient(read, { giveUpAt, stop: () => this.closed });
  }

  private async mustGetRun(runId: string): Promise<RunRow> {
    validateRunId(runId);
    const run = await this.storeInstance.getRun(runId);
    if (run === undefined) throw new RunNotFoundError(runId);
    return run;
  }

  /** The store, migrated. */
  async readyStore(): Promise<Store> {
    await this.ready();
    return this.storeInstance;
  }

  /** Tells this process's executor that new work may be claimable. */
  poke(): void {
    this.executor.poke();
  }

  private ready(): Promise<void> {
    if (this.closed) return Promise.reject(new CairnError("this Cairn was shut down; create a new one"));
    this.migrated ??= this.storeInstance.migrate();
    return this.migrated;
  }
}

function positiveMs(field: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0) throw new InvalidSpecError(field, value, "must be a number of milliseconds > 0");
  return value;
}

/** CairnOptions.warmRuns as the executor takes it: how many unloaded runs to keep. */
function warmRunsBound(option: CairnOptions["warmRuns"]): number {
  if (option !== undefined && (option === null || typeof option !== "object")) {
    throw new InvalidSpecError("warmRuns", option, "must be an object such as { maxRuns: 100 } ({ maxRuns: 0 } keeps none)");
  }
  const maxRuns = option?.maxRuns ?? DEFAULT_WARM_RUNS;
  if (!Number.isInteger(maxRuns) || maxRuns < 0) {
    throw new InvalidSpecError("warmRuns.maxRuns", maxRuns, "must be an integer ≥ 0 (0 keeps no unloaded run in memory)");
  }
  return maxRuns;
}

/**
 * The message id of a keyed `cairn.send`: scoped to the destination run, and apart from the ids
 * `ctx.send` gives its messages (`senderRunId:seq`, which end in digits; this ends in `"]`), so a
 * user's key "A:0" can never be taken for run A's first send, nor swallow another run's message.
 */
function keyedMessageId(runId: string, idempotencyKey: string): string {
  return `send:${JSON.stringify([runId, idempotencyKey])}`;
}

/** How long a read a caller waits on (`status()`, `getEvent`) rides out a database outage. */
const READ_PATIENCE_MS = 30_000;

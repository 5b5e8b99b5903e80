import { randomUUID } from "node:crypto";
import { InvalidSpecError } from "../errors.js";
import { validateRunId } from "./names.js";
import type { ChildWorkflow, WorkflowContext } from "./context.js";
import type { RunHandle } from "./run-handle.js";
import { validateInput, type StandardSchemaV1 } from "./standard-schema.js";

export interface WorkflowOptions<Input> {
  /** Any Standard Schema (zod, valibot, ...): inputs are validated at start, before anything is stored. */
  input?: StandardSchemaV1<unknown, Input>;
  /**
   * External synchrony for a run's end. Default false: a run's outcome waits for its fsync (SQLite,
   * synchronous=FULL) or WAL flush (PostgreSQL) before anyone sees it, as every record does. True:
   * a succeeded finish commits without waiting (the next commit that waits, of any run, makes it
   * durable), so a run's end costs no flush of its own — the next enqueue or step on a busy server
   * does not queue behind it. A failed or cancelled end, a finish of a run that deferred a model
   * call's record (`deferModelCallFsync`) or that returns while one of its operations still acts,
   * or one made while such records of the store are not yet durable, waits as ever; so does a
   * SQLite finish that carries a queue dispatch's claims.
   *
   * Failure semantics: a process crash loses nothing (the commit reached the WAL). A power loss of
   * the machine (SQLite), or a crash or power loss of the database server (PostgreSQL), can erase a
   * finish made since the last commit that waited: the run is then running again, and its executor
   * (or, after a power loss, whichever executor recovers it) replays it from its journal, whose
   * records were durable before the finish — no step runs again, no effect is repeated, and the run
   * finishes again with the value its code returns on replay. That is the same value only if the
   * workflow's code after its last durable operation is deterministic, as Cairn asks of workflow
   * code anyway; a caller that read the first outcome (`result()`, `cairn sql`) may otherwise see a
   * different one later. Anything that read the finish and then committed (a parent woken by it, a
   * run enqueued after it with the same dedupKey) made it durable first: one WAL, written in order.
   */
  deferFinishFsync?: boolean;
}

export interface StartOptions {
  /** The run id. Starting again with an id that exists returns the existing run. Default: a UUID. */
  id?: string;
  /** The run's deadline, from now; its children inherit it. */
  timeoutMs?: number;
}

/** What a Workflow needs from Cairn to start runs. */
export interface WorkflowHost {
  startRun(workflow: string, id: string, input: unknown, timeoutMs: number | undefined): Promise<RunHandle>;
  /** Starts several runs of `workflow` in one commit (Workflow.startMany); handles in the order given. */
  startRuns(workflow: string, runs: readonly { id: string; input: unknown; timeoutMs: number | undefined }[]): Promise<RunHandle[]>;
  /** Places a run on a declared queue (the scheduler's `cairn_queue_runs`); options as the scheduler defines them. */
  enqueueRun(workflow: string, queue: string, input: unknown, options: EnqueueOptions): Promise<RunHandle>;
}

/**
 * How `enqueue` places a run: the scheduler's options (src/scheduler/enqueue.ts holds the same
 * shape with its checks; the engine, a floor below, only carries them).
 */
export interface EnqueueOptions {
  /** The run id. Enqueueing again with an id that exists returns the existing run. Default: a UUID. */
  id?: string;
  /** Lower runs first; only on a queue declared with `priority: true`. Default 0. */
  priority?: number;
  /** While a run enqueued with this key has not finished, enqueueing with it again returns that run. */
  dedupKey?: string;
  /** Do not start before this many milliseconds from now (on the Cairn's clock). */
  delayMs?: number;
  /** Do not start before this time (ms since the epoch, on the Cairn's clock). */
  runAt?: number;
  /** The run's partition (a tenant); default: the queue's `partitionBy.key(input)`. */
  partitionKey?: string;
  /** The run's deadline, from when it is enqueued. */
  timeoutMs?: number;
}

/** A registered workflow: the code, by name. Start runs of it; hand it to `ctx.child`. */
export class Workflow<Input, Output> implements ChildWorkflow<Input, Output> {
  declare readonly __types?: { input: Input; output: Output };

  // Hash-private: a Workflow is handed to users, and its host (the runtime) must not be reachable through it.
  readonly #host: WorkflowHost;
  readonly #options: WorkflowOptions<Input>;

  constructor(
    host: WorkflowHost,
    readonly name: string,
    readonly fn: (ctx: WorkflowContext, input: Input) => Promise<Output>,
    options: WorkflowOptions<Input>,
  ) {
    this.#host = host;
    this.#options = options;
  }

  /**
   * Starts a run and returns its handle once the run's row is committed.
   *
   * Failure semantics: idempotent by id — a second start with the same id (after a crash, or from
   * another process) returns the existing run and starts nothing. Invalid input throws an
   * InvalidInputError and stores nothing.
   */
  async start(input: Input, options: StartOptions = {}): Promise<RunHandle<Output>> {
    const id = options.id ?? randomUUID();
    validateRunId(id, "id");
    if (options.timeoutMs !== undefined && (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0)) {
      throw new InvalidSpecError("timeoutMs", options.timeoutMs, "must be a number of milliseconds > 0");
    }
    const value = this.#options.input === undefined ? input : await validateInput(this.#options.input, input, `input of workflow "${this.name}"`);
    return (await this.#host.startRun(this.name, id, value, options.timeoutMs)) as RunHandle<Output>;
  }

  /**
   * Starts many runs at once: each item is what one `start(input, options)` takes, and the handles
   * come back in the same order. Every run the call creates is committed in one transaction (on
   * PostgreSQL one multi-row INSERT and one NOTIFY), so populating thousands of runs costs a few
   * round trips per call instead of a few per run.
   *
   * Failure semantics: as `start`, item by item — idempotent by id (an id that exists returns the
   * existing run and creates nothing; the same id twice in one call gives two handles on one run,
   * the first item's input). Every id, option and input is checked before anything is stored: a bad
   * one throws InvalidSpecError (naming `items[i]...`) or InvalidInputError and stores nothing. The
   * new runs commit together or not at all. An id that already belongs to a run of another workflow
   * throws InvalidSpecError after the commit (the check needs the stored row): the call's other new
   * runs are then started, and calling again with the same items is safe.
   */
  async startMany(items: readonly { input: Input; options?: StartOptions }[]): Promise<RunHandle<Output>[]> {
    if (!Array.isArray(items)) throw new InvalidSpecError("items", items, "startMany takes an array of { input, options? }");
    const runs: { id: string; input: unknown; timeoutMs: number | undefined }[] = [];
    for (const [i, item] of items.entries()) {
      if (typeof item !== "object" || item === null) throw new InvalidSpecError(`items[${i}]`, item, "each item is { input, options? }");
      const options: StartOptions = item.options ?? {};
      const id = options.id ?? randomUUID();
      validateRunId(id, `items[${i}].options.id`);
      if (options.timeoutMs !== undefined && (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0)) {
        throw new InvalidSpecError(`items[${i}].options.timeoutMs`, options.timeoutMs, "must be a number of milliseconds > 0");
      }
      const input =
        this.#options.input === undefined
          ? item.input
          : await validateInput(this.#options.input, item.input, `input of workflow "${this.name}" (items[${i}])`);
      runs.push({ id, input, timeoutMs: options.timeoutMs });
    }
    return (await this.#host.startRuns(this.name, runs)) as RunHandle<Output>[];
  }

  /**
   * Places a run on a queue declared with `cairn.queue(queue, ...)` and returns its handle once the
   * run and its queue entry are committed; an executor serving the queue starts it when the queue's
   * limits and policy allow (README, "Queues").
   *
   * Failure semantics: the run and its queue entry commit together or not at all. Idempotent by id,
   * and by a live `dedupKey` (one whose run has not finished): a second enqueue returns the existing
   * run and stores nothing. An unknown queue or bad option throws InvalidSpecError and stores nothing.
   */
  async enqueue(queue: string, input: Input, options: EnqueueOptions = {}): Promise<RunHandle<Output>> {
    const value = this.#options.input === undefined ? input : await validateInput(this.#options.input, input, `input of workflow "${this.name}"`);
    return (await this.#host.enqueueRun(this.name, queue, value, options)) as RunHandle<Output>;
  }
}

import type { SqlClient } from "../store/store.js";

/**
 * What a step function receives. `idempotencyKey` is `runId:seq`: the same on every attempt and
 * after every crash, so an external service given it can deduplicate.
 */
export interface StepCall {
  idempotencyKey: string;
  /** 1 for the first attempt in this process. */
  attempt: number;
  /** Aborted when the attempt times out, or the run is cancelled or reaches its deadline. */
  signal: AbortSignal;
}

export interface BackoffOptions {
  /** Delay before the second attempt. Default 100. */
  initialDelayMs?: number;
  /** Growth per attempt. Default 2. */
  factor?: number;
  /** Cap on any one delay. Default 30_000. */
  maxDelayMs?: number;
}

export interface StepOptions {
  /** Further attempts after the first fails. Default 0. */
  retries?: number;
  backoff?: BackoffOptions;
  /**
   * Whether an error deserves another attempt (when attempts remain). Default: every error except
   * a TerminalError. A RetryableError is retried whatever this says. If it throws, the step fails
   * with what it threw (recorded, like any failure).
   */
  shouldRetry?: (error: unknown) => boolean;
  /** Per attempt: the attempt's signal is aborted and the attempt fails with a TimeoutError. */
  timeoutMs?: number;
  /**
   * "process": run the step in a separate process from the executor's warm pool, so that an
   * infinite loop (with `timeoutMs`), an out-of-memory, `process.exit`, an exception thrown
   * asynchronously or a native crash fails this step alone (IsolatedStepCrashedError; the process is
   * killed and replaced) while the executor and other runs go on. `fn` must then name an exported
   * function, `isolated(import.meta.url, "name").with(input)`: a closure cannot cross processes.
   * Journaled, retried and replayed like any step (docs/isolation.md).
   */
  isolation?: "process";
  /** With `isolation: "process"`: the process's V8 heap limit in MB (`--max-old-space-size`). */
  maxMemoryMb?: number;
}

export interface ChildOptions {
  /** The child's run id. Default `parentRunId:seq`, stable across replays. */
  id?: string;
  /** The child's own deadline; it never outlives its parent's. */
  timeoutMs?: number;
}

/** A child run started from a workflow. */
export interface ChildHandle<Output> {
  readonly id: string;
  /**
   * Waits for the child to finish and returns its output (or throws its error). A durable wait: it
   * takes a seq, the parent unloads while the child runs, and the outcome is recorded in the
   * parent's journal.
   */
  result(): Promise<Output>;
  /**
   * Cancels this child run (and its descendants) from inside the parent workflow, as OTP's
   * supervisor stops a child by its `shutdown`. A durable operation of the parent (kind
   * `child-cancel`): it takes a seq and is recorded once; on replay it does nothing again.
   *
   * - `graceMs` 0 (the default; OTP's `brutal_kill`): the child is cancelled at once — its in-flight
   *   step's `signal` aborts and its next write is refused.
   * - `graceMs` > 0 (OTP's timeout) or `Infinity` (OTP's `infinity`): the child is first asked to
   *   stop — a message on the reserved topic `cairn:shutdown` ({@link SHUTDOWN_TOPIC}), which its
   *   workflow can `ctx.select` on or `ctx.recv` to finish cleanly — and the parent waits durably for
   *   the child to end, at most `graceMs`; then it cancels it as above. During the grace the child's
   *   in-flight step is not disturbed (its result commits); its `signal` aborts only when the grace ends.
   *
   * Resolves with how the child ended: its own end within the grace period, or `cancelled`.
   *
   * Failure semantics: the shutdown request, the grace period's deadline and the cancel are each
   * recorded; a crash of the parent's process mid-way resumes the wait with the recorded deadline
   * (a restart never extends the grace) and cancels at most once (cancelling an ended run is a no-op).
   */
  cancel(options?: ChildCancelOptions): Promise<ChildExit>;
}

export interface ChildCancelOptions {
  /** How long the child may take to stop after it is asked; 0 (default) cancels at once, Infinity waits for it. */
  graceMs?: number;
}

/** The reserved topic a graceful `handle.cancel({ graceMs })` asks a child to stop on. */
export const SHUTDOWN_TOPIC = "cairn:shutdown";

/** How a child run ended, as a select or a cancel reports it: never thrown. */
export type ChildExit = { childId: string; status: "succeeded"; value: unknown } | { childId: string; status: "failed" | "cancelled"; error: unknown };

/**
 * One branch of `ctx.select` / `ctx.race`: a child run's end (its handle), a message on a topic of
 * this run's inbox, or a timer (`timeoutMs` from when the select first waits, or an absolute `until`).
 */
export type SelectBranch = ChildHandle<unknown> | { topic: string } | { timeoutMs: number } | { until: Date | number };

/** The branch that won a select, under its key (the array index, or the object key). */
export type Selected<K> = ({ key: K; kind: "child" } & ChildExit) | { key: K; kind: "message"; topic: string; value: unknown } | { key: K; kind: "timer" };

export type SelectBranches = readonly SelectBranch[] | Readonly<Record<string, SelectBranch>>;
export type SelectKey<B> = B extends readonly unknown[] ? number : Extract<keyof B, string>;

export interface RecvOptions {
  /** Give up after this long and return undefined. Default: wait forever. */
  timeoutMs?: number;
}

/** Something `ctx.child` can start: a workflow registered with `cairn.workflow`. */
export interface ChildWorkflow<Input, Output> {
  readonly name: string;
  /** @internal phantom types */
  readonly __types?: { input: Input; output: Output };
}

/**
 * The run context: the only door from workflow code to the outside world. Every method is a
 * durable operation with an identity fixed when it is called (its scope, kind, name, fingerprint and
 * occurrence; see docs/replay.md), and it records its outcome before the workflow sees it. On replay
 * a recorded operation returns its record without acting again, in the order the workflow saw it
 * live; a call that contradicts the journal fails the run with a NonDeterminismError.
 *
 * Operations may be called inside a step's function (a tool's `execute`): they are journaled in that
 * step's scope. `recv` and a child's `result()` are refused there (they end only by unloading the
 * run), and nothing may be called inside `transaction`'s function.
 */
export interface WorkflowContext {
  readonly runId: string;
  readonly workflowName: string;
  /**
   * True while the run is replaying: recorded outcomes remain to be handed back before the run goes
   * on live. Lets callbacks with effects outside Cairn (logging, metrics, an AI SDK `onStepFinish`)
   * act once rather than again on every replay.
   */
  readonly isReplaying: boolean;

  /**
   * Runs `fn` as a step and records its result (or its final error).
   *
   * Failure semantics: the result is committed before this promise resolves. A crash while `fn`
   * runs, or after it returned but before the commit, runs `fn` again on recovery (at least once),
   * with the same `idempotencyKey`. Retries and their backoff happen in memory; a crash starts the
   * attempt count again at 1. A step that exhausts its retries records its error, and replay throws
   * that same error.
   */
  step<T>(name: string, fn: (call: StepCall) => Promise<T> | T, options?: StepOptions): Promise<T>;

  /**
   * Runs `fn` inside a database transaction on Cairn's own database and commits its writes together
   * with the step's checkpoint: exactly once. Placeholders are `$1, $2, ...` on both backends.
   *
   * Failure semantics: a crash before the commit rolls back both the user's writes and the
   * checkpoint; recovery runs `fn` again in a new transaction. If `fn` throws, its writes are
   * rolled back and the error is recorded.
   */
  transaction<T>(name: string, fn: (sql: SqlClient) => Promise<T>): Promise<T>;

  /**
   * Sleeps durably. The wake-up time is recorded when the sleep begins; the run unloads (holding
   * no memory) and a timer row wakes it. Failure semantics: a restart before the wake-up time
   * sleeps only the remainder; after it, the sleep ends at once.
   */
  sleep(name: string, delayMs: number): Promise<void>;
  /** Sleeps durably until an absolute time. Same semantics as `sleep`. */
  sleepUntil(name: string, until: Date | number): Promise<void>;

  /** The current time in ms, recorded: replay returns the same value. */
  now(): Promise<number>;
  /** A random number in [0, 1), recorded. */
  random(): Promise<number>;
  /** A random UUID, recorded. */
  uuid(): Promise<string>;

  /**
   * Sends a message to another run's mailbox. Failure semantics: idempotent; the message id is
   * `runId:seq`, so a send repeated by replay after a crash inserts nothing.
   */
  send(runId: string, topic: string, value: unknown): Promise<void>;

  /**
   * Receives the oldest unconsumed message on `topic` sent to this run, or undefined after
   * `timeoutMs`. The run unloads while it waits. Failure semantics: exactly once — the message is
   * marked consumed in the same transaction that records this step; the timeout's deadline is
   * recorded when the wait begins, so a restart does not extend it.
   */
  recv<T = unknown>(topic: string, options?: RecvOptions): Promise<T | undefined>;

  /**
   * Publishes a key/value pair others read with `cairn.getEvent`. Failure semantics: the event and
   * the step's checkpoint commit together; the last value set wins.
   */
  setEvent(key: string, value: unknown): Promise<void>;

  /**
   * Starts a child run. Its deadline is at most its parent's; cancelling the parent cancels it.
   * Failure semantics: the child's row and the parent's record of it commit together, under an id
   * stable across replays, so a crash never starts the child twice.
   */
  child<Input, Output>(workflow: ChildWorkflow<Input, Output>, input: Input, options?: ChildOptions): Promise<ChildHandle<Output>>;

  /**
   * Waits durably for the first of several events — a child run's end, a message on a topic, a
   * timer — and returns which won, as `{ key, kind, ... }` (a child's failure is reported, not
   * thrown). Among branches ready when the select looks, the first in listing order wins; otherwise
   * the run unloads until one is (a message, the child's end or the earliest timer wakes it).
   *
   * Failure semantics: the winner is recorded as ONE journal entry (kind `select`), so replay
   * returns the same winner whatever is ready by then. A winning message is consumed in the same
   * transaction that records it (exactly once); a losing message stays in the inbox. Timers are
   * measured from the select's first wait, whose deadlines are recorded then (a pending row), so a
   * restart never extends them. A crash after the event but before the record looks again: the
   * event is still there (a child's end is final, an unconsumed message stays), so the same or an
   * earlier-listed branch wins — and once recorded, always that one. Children must be this run's own
   * (`ctx.child`); call it from the workflow itself, not inside a step.
   */
  select<const B extends SelectBranches>(name: string, branches: B): Promise<Selected<SelectKey<B>>>;
  /**
   * `select`, unwrapped: the winning child's output (or its error thrown), the winning message's
   * value, or a `TimeoutError` thrown when a timer wins. Same failure semantics as `select`.
   */
  race<T = unknown>(name: string, branches: SelectBranches): Promise<T>;

  /**
   * Lets code change under in-flight runs: returns true for runs that reach this point under the
   * new code (and records that), false for runs whose journal already went past it under the old
   * code (it then takes no seq). Branch on it: `if (await ctx.patched("v2-pricing")) ... else ...`.
   */
  patched(name: string): Promise<boolean>;
}

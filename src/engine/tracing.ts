import type { RunRow, StepKind, StepRecord, WriteOp } from "../store/store.js";

/**
 * The engine's tracing hooks: what a run tells a tracer about itself, as an interface the engine
 * declares and a layer above implements (the OpenTelemetry one is `observe/telemetry/`; the face
 * hands it to the executor). The engine never imports a tracing library. A run nothing records
 * (`open` answers undefined: no SDK is configured) is not traced at all — its operations pay a few
 * `undefined` checks — and tracing never fails a run: a trace that cannot be opened is skipped.
 *
 * What is traced is work done here, in this process: a run's execution (one span per time it is
 * loaded — a run that sleeps, waits or is taken over is loaded again, and each load is a span of
 * the same trace), and each durable operation that acts live. An operation whose record is
 * replayed did no work and gets no span; the run's span counts them instead.
 */

/** Span attributes, as OpenTelemetry takes them (no nested objects). */
export type TraceAttributes = Record<string, string | number | boolean | string[] | number[] | undefined>;

/** How a loaded run let go of its run (see ExecutionHost.released), or its outcome if it settled. */
export type RunEnd = "succeeded" | "failed" | "suspended" | "lost" | "store-error";

export interface RunTracing {
  /**
   * A run is being created (`workflow.start()`): rows to commit with its row — the caller's trace
   * context, so every later execution of the run joins the caller's trace. Empty when not tracing.
   */
  starting(runId: string, workflow: string): WriteOp[];
  /**
   * A run was loaded by `executorId` with `recorded` journal rows: its execution's trace, or
   * undefined when nothing is recording (then the run is not traced at all). May read the run's
   * stored trace context first.
   */
  open(run: Readonly<RunRow>, executorId: string, recorded: number): RunTrace | undefined | Promise<RunTrace | undefined>;
}

/** One execution of one run. */
export interface RunTrace {
  /** Runs `fn` with the run's span as the active context (for the workflow function). */
  within<T>(fn: () => T): T;
  /**
   * A durable operation acts live: its span (child of the enclosing operation's span, by `scope`,
   * or of the run's), or undefined for kinds not traced.
   */
  operation(
    kind: StepKind,
    name: string,
    seq: number,
    identity: string,
    scope: string,
    spec: OperationTraceSpec<never> | undefined,
  ): OperationTrace | undefined;
  /** An operation's record was replayed: no work, no span; counted on the run's span. */
  replayed(): void;
  /** The execution ended; `error` is the run's failure (or why it was let go). Called once. */
  end(how: RunEnd, error?: unknown): void;
}

/** One live durable operation. */
export interface OperationTrace {
  /** Runs `fn` with the operation's span as the active context (the step's own function). */
  within<T>(fn: () => T): T;
  /**
   * Rows to commit with the operation's record beside `also`: a child run's trace context, so the
   * child's executions are spans under this operation's.
   */
  carry(also: WriteOp[]): WriteOp[];
  /** The operation ended (see OperationEnd). */
  end(how: OperationEnd): void;
}

/**
 * How a live operation ended: with the record it wrote (its status, attempts; `error`, what a failed
 * one threw), failed without a record (`error`), or abandoned — the run stopped before a record
 * (lost, cancelled, unloaded) — and the outcome's attributes (OperationTraceSpec.outcome).
 */
export interface OperationEnd {
  record?: StepRecord;
  error?: unknown;
  abandoned?: boolean;
  attributes?: TraceAttributes | undefined;
}

/**
 * What a layer above the engine says of its operation's span (a model call's GenAI attributes):
 * a name instead of `<kind> <name>`, attributes known at the call, and attributes of the outcome.
 */
export interface OperationTraceSpec<Work> {
  spanName?: string;
  /** The span kind, where it is not INTERNAL: a model call is a CLIENT call to a provider. */
  client?: boolean;
  attributes?: TraceAttributes;
  outcome?: (work: Work) => TraceAttributes | undefined;
}

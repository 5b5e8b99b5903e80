import {
  context,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
  type TracerProvider,
} from "@opentelemetry/api";
import type { RunEnd, RunTrace, RunTracing, OperationEnd, OperationTrace, OperationTraceSpec, TraceAttributes } from "../../engine/tracing.js";
import type { RunRow, StepKind, Store, WriteOp } from "../../store/store.js";
import { errorFromText } from "../../store/value/index.js";
import { cairnVersion } from "../../util/package-version.js";
import { TRACE_CONTEXT_TABLE } from "./telemetry-extension.js";
import { formatTraceContext, parseTraceContext, type StoredTraceContext } from "./trace-context.js";

/** The instrumentation scope spans are made under. */
export const TRACER_NAME = "cairn";
const TRACER_VERSION = cairnVersion();

/**
 * The kinds of operations that get a span when they act live: the ones that do work worth seeing
 * in a trace. Recorded values (`now`, `random`, `uuid`), patches, events and the durable waits
 * (sleep, recv, a child's result — a wait that unloads the run has no end in this process) do not;
 * an operation a layer describes (a model call, a tool call: `OperationTraceSpec`) always does.
 */
const TRACED_KINDS: ReadonlySet<string> = new Set(["step", "transaction", "child", "send", "model", "tool"]);

/**
 * Cairn's runs, steps, model calls and tool calls as OpenTelemetry spans, through
 * `@opentelemetry/api` alone: spans are exported when the application configures an SDK (a global
 * tracer provider, or `new Cairn({ tracerProvider })`); Cairn never installs or replaces one. With
 * none configured a run is not traced at all: `open` answers undefined and the engine skips every
 * hook (README, "OpenTelemetry").
 *
 * The spans of one run, across processes and takeovers:
 *
 *   start <workflow>       PRODUCER, in the caller's active context, at `start()`; its context is
 *    │                     stored with the run (cairn_trace_contexts) in the same commit
 *    ├ run <workflow>      CONSUMER, one per execution (a load: first run, wake-up, takeover);
 *    │                     `invoke_agent <name>` for an agent's run
 *    │  ├ step <name>      each durable operation that acts live; nested ones under their step
 *    │  ├ chat <model>     a model call (CLIENT), GenAI attributes and token usage
 *    │  ├ execute_tool <t> a tool call
 *    │  └ child <w>        the child run's `run <w>` spans are its children
 *    └ run <workflow>      after a takeover, in another process: the same trace
 *
 * An operation replayed from the journal did no work: it gets no span, and the run span counts it
 * (`cairn.run.replayed_operations`).
 */
export class OpenTelemetryTracing implements RunTracing {
  /** Workflows registered as agents (`cairn.agent`): their runs are GenAI `invoke_agent` spans. */
  private readonly agents = new Set<string>();

  constructor(
    private readonly provider: TracerProvider | undefined,
    private readonly store: () => Store,
  ) {}

  agent(workflow: string): void {
    this.agents.add(workflow);
  }

  /**
   * The tracer, or undefined while no SDK is configured. The global provider is asked each time
   * (it is cheap), so an SDK registered after Cairn was made is used, and one disabled is not.
   */
  private tracer(): Tracer | undefined {
    if (this.provider !== undefined) return this.provider.getTracer(TRACER_NAME, TRACER_VERSION);
    const global = trace.getTracerProvider() as TracerProvider & { getDelegateTracer?: (name: string, version?: string) => Tracer | undefined };
    // The API's proxy answers "no delegate" until an SDK registers: then there is nothing to record.
    if (typeof global.getDelegateTracer === "function") return global.getDelegateTracer(TRACER_NAME, TRACER_VERSION);
    return global.getTracer(TRACER_NAME, TRACER_VERSION);
  }

  starting(runId: string, workflow: string): WriteOp[] {
    return safely(() => this.startSpan(runId, workflow), []);
  }

  private startSpan(runId: string, workflow: string): WriteOp[] {
    const tracer = this.tracer();
    if (tracer === undefined) return [];
    const span = tracer.startSpan(
      `start ${workflow}`,
      { kind: SpanKind.PRODUCER, attributes: { "cairn.run.id": runId, "cairn.workflow": workflow } },
      context.active(),
    );
    span.end();
    const stored = formatTraceContext(span.spanContext());
    return stored === undefined ? [] : [traceContextRow(runId, stored)];
  }

  open(run: Readonly<RunRow>, executorId: string, recorded: number): Promise<RunTrace> | undefined {
    const tracer = safely(() => this.tracer(), undefined);
    if (tracer === undefined) return undefined;
    return this.openTraced(tracer, run, executorId, recorded);
  }

  private async openTraced(tracer: Tracer, run: Readonly<RunRow>, executorId: string, recorded: number): Promise<RunTrace> {
    const rows = await this.store().select<{ traceparent: string; tracestate: string | null }>(
      `SELECT traceparent, tracestate FROM ${TRACE_CONTEXT_TABLE} WHERE run_id = $1`,
      [run.id],
    );
    const remote = rows[0] === undefined ? undefined : parseTraceContext(rows[0]);
    const parent = remote === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, remote);
    const agent = this.agents.has(run.workflow);
    const span = tracer.startSpan(
      `${agent ? "invoke_agent" : "run"} ${run.workflow}`,
      {
        kind: SpanKind.CONSUMER,
        attributes: defined({
          "gen_ai.operation.name": agent ? "invoke_agent" : undefined,
          "gen_ai.agent.name": agent ? run.workflow : undefined,
          "cairn.run.id": run.id,
          "cairn.workflow": run.workflow,
          "cairn.executor": executorId,
          "cairn.app_version": run.appVersion,
          "cairn.run.parent_id": run.parentId ?? undefined,
          "cairn.run.root_id": run.rootId,
          "cairn.run.recoveries": run.recoveries,
          "cairn.run.recorded_operations": recorded,
        }),
      },
      parent,
    );
    if (remote === undefined) {
      // A run with no trace of its own yet (a fork; started where no tracer was configured): this
      // execution's span begins it, and later executions — in any process — join it.
      const stored = formatTraceContext(span.spanContext());
      if (stored !== undefined) {
        await this.store()
          .commit({ runId: run.id, executorId }, [traceContextRow(run.id, stored)])
          .catch(() => undefined);
      }
    }
    return new OpenTelemetryRunTrace(tracer, span, trace.setSpan(parent, span), run);
  }
}

function traceContextRow(runId: string, stored: StoredTraceContext): WriteOp {
  return {
    type: "insert",
    table: TRACE_CONTEXT_TABLE,
    values: { run_id: runId, traceparent: stored.traceparent, tracestate: stored.tracestate, created_at: Date.now() },
    // The first trace a run was given stays its trace (a second `start()` of the same id adds nothing).
    onConflict: { keys: ["run_id"], action: "ignore" },
  };
}

class OpenTelemetryRunTrace implements RunTrace {
  private replayedOperations = 0;
  private ended = false;
  /** The contexts of operations acting live, by identity: the parents of operations called inside them. */
  private readonly scopes = new Map<string, Context>();

  constructor(
    private readonly tracer: Tracer,
    private readonly span: Span,
    private readonly context: Context,
    private readonly run: Readonly<RunRow>,
  ) {}

  within<T>(fn: () => T): T {
    return context.with(this.context, fn);
  }

  operation(
    kind: StepKind,
    name: string,
    seq: number,
    identity: string,
    scope: string,
    spec: OperationTraceSpec<never> | undefined,
  ): OperationTrace | undefined {
    return safely((): OperationTrace | undefined => {
      if (spec === undefined && !TRACED_KINDS.has(kind)) return undefined;
      const parent = (scope === "" ? undefined : this.scopes.get(scope)) ?? this.context;
      const span = this.tracer.startSpan(
        spec?.spanName ?? `${kind} ${name}`,
        {
          kind: spec?.client === true ? SpanKind.CLIENT : SpanKind.INTERNAL,
          attributes: defined({
            ...spec?.attributes,
            "cairn.run.id": this.run.id,
            "cairn.workflow": this.run.workflow,
            "cairn.step.name": name,
            "cairn.step.kind": kind,
            "cairn.step.seq": seq,
          }),
        },
        parent,
      );
      const own = trace.setSpan(parent, span);
      this.scopes.set(identity, own);
      return new OpenTelemetryOperationTrace(span, own, () => this.scopes.delete(identity));
    }, undefined);
  }

  replayed(): void {
    this.replayedOperations++;
  }

  end(how: RunEnd, error?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    safely(() => {
      this.span.setAttributes({ "cairn.run.outcome": how, "cairn.run.replayed_operations": this.replayedOperations });
      if (how === "failed" || how === "store-error") failed(this.span, error);
      this.span.end();
    }, undefined);
  }
}

class OpenTelemetryOperationTrace implements OperationTrace {
  private ended = false;

  constructor(
    private readonly span: Span,
    private readonly context: Context,
    private readonly done: () => void,
  ) {}

  within<T>(fn: () => T): T {
    return context.with(this.context, fn);
  }

  carry(also: WriteOp[]): WriteOp[] {
    const stored = safely(() => formatTraceContext(this.span.spanContext()), undefined);
    if (stored === undefined) return also;
    const rows = also.flatMap((op) => (op.type === "run" ? [traceContextRow(op.run.id, stored)] : []));
    return rows.length === 0 ? also : [...also, ...rows];
  }

  end(how: OperationEnd): void {
    if (this.ended) return;
    this.ended = true;
    this.done();
    safely(() => {
      if (how.attributes !== undefined) this.span.setAttributes(defined(how.attributes));
      if (how.record !== undefined) {
        this.span.setAttribute("cairn.attempt", how.record.attempts);
        if (how.record.status === "failed") failed(this.span, how.error ?? (how.record.error === null ? undefined : errorFromText(how.record.error)));
      } else if (how.error !== undefined) {
        failed(this.span, how.error);
      } else if (how.abandoned === true) {
        // The run stopped here before the operation's record (lost, cancelled, unloaded): whoever
        // runs it next does it again, under a span of its own.
        this.span.setAttribute("cairn.step.abandoned", true);
      }
      this.span.end();
    }, undefined);
  }
}

/**
 * Status ERROR, and the error as an `exception` event (the semantic conventions' attributes). Made
 * here rather than with `recordException`, which names the type by an error's `code` when it has
 * one: a Cairn error's type is its class name (`TerminalError`), its code is `cairn.error.code`.
 */
function failed(span: Span, error: unknown): void {
  const { name, message, stack, code } = describeError(error);
  span.addEvent("exception", defined({ "exception.type": name, "exception.message": message, "exception.stacktrace": stack, "cairn.error.code": code }));
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

function describeError(error: unknown): { name: string | undefined; message: string; stack: string | undefined; code: string | undefined } {
  if (error !== null && typeof error === "object") {
    const { name, message, stack, code } = error as { name?: unknown; message?: unknown; stack?: unknown; code?: unknown };
    return {
      name: typeof name === "string" ? name : undefined,
      message: typeof message === "string" ? message : safeString(error),
      stack: typeof stack === "string" ? stack : undefined,
      code: typeof code === "string" ? code : undefined,
    };
  }
  return { name: undefined, message: safeString(error), stack: undefined, code: undefined };
}

function safeString(value: unknown): string {
  try {
    return String(value);
  } catch {
    return "unprintable error";
  }
}

/**
 * Tracing never fails a run: the API itself does not throw, but an SDK's span processor may (its
 * `onStart`, `onEnd`), and a run must not pay for it. What fails is not traced.
 */
function safely<T>(fn: () => T, otherwise: T): T {
  try {
    return fn();
  } catch {
    return otherwise;
  }
}

/** Attributes without the undefined ones (an SDK warns of each). */
function defined(attributes: TraceAttributes): Attributes {
  const out: Attributes = {};
  for (const key in attributes) {
    const value = attributes[key];
    if (value !== undefined) out[key] = value;
  }
  return out;
}

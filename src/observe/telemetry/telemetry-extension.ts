import type { StoreExtension } from "../../store/extension.js";

/** One row per run whose trace is known: the W3C trace context its executions are children of. */
export const TRACE_CONTEXT_TABLE = "cairn_trace_contexts";

/**
 * The telemetry layer as the store sees it: one table, `cairn_trace_contexts (run_id, traceparent,
 * tracestate, created_at)`, written with the run's own row at `start()` (the caller's trace, through
 * a `start <workflow>` span), with a child run's row (the parent's `child` span), or — for a run
 * that had none (a fork, a run started where no tracer was configured) — when it is first executed
 * with a tracer. Every later execution of the run, in any process, is a span of that trace. Rows go
 * with their run when it is deleted; a fork starts a trace of its own.
 */
export const TELEMETRY_EXTENSION: StoreExtension = {
  name: "telemetry",
  migrations: [
    {
      version: 1,
      name: "trace contexts",
      statements: [
        `CREATE TABLE ${TRACE_CONTEXT_TABLE} (
          run_id TEXT PRIMARY KEY,
          traceparent TEXT NOT NULL,
          tracestate TEXT,
          created_at BIGINT NOT NULL
        )`,
      ],
    },
  ],
  tables: [TRACE_CONTEXT_TABLE],
  stepKinds: [],
  hooks: {
    onDelete: { runTables: [TRACE_CONTEXT_TABLE], payloadColumns: [] },
  },
};

import { createTraceState, isSpanContextValid, type SpanContext } from "@opentelemetry/api";

/**
 * The W3C Trace Context form of a span context (https://www.w3.org/TR/trace-context/): how a run
 * keeps the trace it belongs to in `cairn_trace_contexts`, readable by any process and any tool.
 * Written by Cairn itself rather than by the application's propagator, so it does not depend on
 * which propagators (if any) the application registered.
 */

export interface StoredTraceContext {
  traceparent: string;
  tracestate: string | null;
}

export function formatTraceContext(context: SpanContext): StoredTraceContext | undefined {
  if (!isSpanContextValid(context)) return undefined;
  const flags = (context.traceFlags & 0xff).toString(16).padStart(2, "0");
  const state = context.traceState?.serialize();
  return { traceparent: `00-${context.traceId}-${context.spanId}-${flags}`, tracestate: state === undefined || state === "" ? null : state };
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The remote span context a stored trace context names, or undefined if it is not a valid one. */
export function parseTraceContext(stored: StoredTraceContext): SpanContext | undefined {
  const match = TRACEPARENT.exec(stored.traceparent.trim());
  if (match === null || match[1] === "ff") return undefined;
  const context: SpanContext = {
    traceId: match[2]!,
    spanId: match[3]!,
    traceFlags: parseInt(match[4]!, 16),
    isRemote: true,
    ...(stored.tracestate === null || stored.tracestate === "" ? {} : { traceState: createTraceState(stored.tracestate) }),
  };
  return isSpanContextValid(context) ? context : undefined;
}

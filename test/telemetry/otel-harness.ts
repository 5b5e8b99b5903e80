import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { afterEach } from "vitest";

/**
 * An OpenTelemetry SDK for one test: an in-memory exporter behind a simple (synchronous) processor.
 * `local()` is a provider handed to Cairn (`tracerProvider`), touching nothing global; `global()`
 * registers it and an AsyncLocalStorage context manager as the process's, as an application would,
 * and both are removed after the test.
 */
export function otelFactory() {
  let registered = false;
  afterEach(() => {
    if (!registered) return;
    trace.disable();
    context.disable();
    registered = false;
  });
  const make = () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    return { exporter, provider, spans: () => new Spans(exporter.getFinishedSpans()) };
  };
  return {
    local: make,
    global() {
      const made = make();
      context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
      trace.setGlobalTracerProvider(made.provider);
      registered = true;
      return made;
    },
  };
}

/** Finished spans, with the lookups the tests make. */
export class Spans {
  constructor(readonly all: readonly ReadableSpan[]) {}

  named(name: string): ReadableSpan[] {
    return this.all.filter((span) => span.name === name);
  }

  one(name: string): ReadableSpan {
    const found = this.named(name);
    if (found.length !== 1) throw new Error(`expected one span "${name}", found ${found.length}: ${this.all.map((s) => s.name).join(", ")}`);
    return found[0]!;
  }

  /** The span whose id is `span`'s parent's, if finished. */
  parentOf(span: ReadableSpan): ReadableSpan | undefined {
    const parentId = parentSpanId(span);
    return this.all.find((other) => other.spanContext().spanId === parentId);
  }

  names(): string[] {
    return this.all.map((span) => span.name);
  }
}

/** The parent span id (sdk-trace-base 2 keeps it in `parentSpanContext`). */
export function parentSpanId(span: ReadableSpan): string | undefined {
  return span.parentSpanContext?.spanId;
}

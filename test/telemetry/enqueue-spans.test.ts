import { SpanKind } from "@opentelemetry/api";
import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { otelFactory, parentSpanId } from "./otel-harness.js";

// An enqueued run carries the caller's trace context as start() does: the enqueue's commit keeps
// the `start` span's context, and the run span the executor opens later is its child.
describe.each(BACKENDS)("OpenTelemetry spans of an enqueued run on $name", (backend) => {
  const env = cairnFactory(backend);
  const otel = otelFactory();

  it("the run span is a child of the enqueue's start span; a dedup hit starts no second trace", async () => {
    const { provider, spans } = otel.local();
    const cairn = env.cairn(await env.database(), { tracerProvider: provider });
    cairn.queue("mail", { workerConcurrency: 2 });
    const send = cairn.workflow("send", async (ctx, to: string) => ctx.step("deliver", () => `sent to ${to}`));
    await cairn.launch();
    const run = await send.enqueue("mail", "ada", { id: "mail-1", dedupKey: "ada" });
    // Same live dedup key: the existing run's handle, and no start span of its own.
    const again = await send.enqueue("mail", "ada", { id: "mail-2", dedupKey: "ada" });
    expect(again.id).toBe("mail-1");
    expect(await run.result()).toBe("sent to ada");

    const all = spans();
    const start = all.one("start send");
    expect(start.kind).toBe(SpanKind.PRODUCER);
    expect(start.attributes).toMatchObject({ "cairn.run.id": "mail-1", "cairn.workflow": "send" });
    const runSpan = all.one("run send");
    expect(parentSpanId(runSpan)).toBe(start.spanContext().spanId);
    expect(runSpan.spanContext().traceId).toBe(start.spanContext().traceId);
    expect(parentSpanId(all.one("step deliver"))).toBe(runSpan.spanContext().spanId);
  });
});

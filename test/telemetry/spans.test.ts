import { SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { BasicTracerProvider } from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { TerminalError } from "../../src/index.js";
import { storeOf } from "../../src/internal.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { otelFactory, parentSpanId } from "./otel-harness.js";

describe.each(BACKENDS)("OpenTelemetry spans on $name", (backend) => {
  const env = cairnFactory(backend);
  const otel = otelFactory();

  it("a workflow's steps and its child run form one trace: start → run → steps, child → the child's run", async () => {
    const { provider, spans } = otel.local();
    const cairn = env.cairn(await env.database(), { tracerProvider: provider });
    // The child finishes only once its parent's first load has ended suspended on it: otherwise a
    // fast child ends before the parent waits, and the parent never suspends (one load, not two).
    const parentSuspended = () => eventually(() => spans().named("run parent").length === 1);
    const leaf = cairn.workflow("leaf", async (ctx, n: number) =>
      ctx.step("square", async () => {
        await parentSuspended();
        return n * n;
      }),
    );
    let tries = 0;
    const parent = cairn.workflow("parent", async (ctx, n: number) => {
      const a = await ctx.step("a", () => n + 1);
      const b = await ctx.step(
        "flaky",
        async () => {
          if (++tries < 2) throw new Error("once");
          // Nested: journaled (and traced) inside "flaky".
          return ctx.step("inner", () => a * 2);
        },
        { retries: 2, backoff: { initialDelayMs: 1 } },
      );
      await ctx.now(); // a recorded value: no span
      const failure = await ctx.step("refuse", () => Promise.reject(new TerminalError("no such order"))).catch((error: Error) => error.message);
      const child = await ctx.child(leaf, b);
      return { a, b, failure, square: await child.result() };
    });
    await cairn.launch();
    const run = await parent.start(3, { id: "tree" });
    expect(await run.result()).toEqual({ a: 4, b: 8, failure: "no such order", square: 64 });

    const all = spans();
    const start = all.one("start parent");
    expect(start.kind).toBe(SpanKind.PRODUCER);
    expect(parentSpanId(start)).toBeUndefined(); // no context was active at start()
    const runs = all.named("run parent");
    // Loaded twice: until it waits on its child, then when the child's end wakes it.
    expect(runs).toHaveLength(2);
    for (const r of runs) {
      expect(parentSpanId(r)).toBe(start.spanContext().spanId);
      expect(r.attributes).toMatchObject({ "cairn.run.id": "tree", "cairn.workflow": "parent", "cairn.executor": expect.any(String) });
    }
    expect(runs.map((r) => r.attributes["cairn.run.outcome"])).toEqual(["suspended", "succeeded"]);
    // The second load replayed a, flaky, now, refuse and the child's start: no spans for them.
    expect(runs[1]!.attributes["cairn.run.replayed_operations"]).toBe(5);

    const a = all.one("step a");
    expect(parentSpanId(a)).toBe(runs[0]!.spanContext().spanId);
    expect(a.attributes).toMatchObject({
      "cairn.run.id": "tree",
      "cairn.step.name": "a",
      "cairn.step.kind": "step",
      "cairn.step.seq": 0,
      "cairn.attempt": 1,
    });
    const flaky = all.one("step flaky");
    expect(flaky.attributes["cairn.attempt"]).toBe(2);
    expect(parentSpanId(all.one("step inner"))).toBe(flaky.spanContext().spanId);
    expect(all.named("now now")).toHaveLength(0);

    const refuse = all.one("step refuse");
    expect(refuse.status.code).toBe(SpanStatusCode.ERROR);
    expect(refuse.status.message).toBe("no such order");
    expect(refuse.events.map((e) => [e.name, e.attributes?.["exception.type"], e.attributes?.["exception.message"]])).toEqual([
      ["exception", "TerminalError", "no such order"],
    ]);

    const childOp = all.one("child leaf");
    const leafRun = all.one("run leaf");
    expect(parentSpanId(leafRun)).toBe(childOp.spanContext().spanId);
    expect(leafRun.attributes["cairn.run.parent_id"]).toBe("tree");
    expect(parentSpanId(all.one("step square"))).toBe(leafRun.spanContext().spanId);

    const traceIds = new Set(all.all.map((s) => s.spanContext().traceId));
    expect(traceIds.size).toBe(1);
    // Each run's trace context is a row of its own.
    const stored = await storeOf(cairn).select<{ run_id: string; traceparent: string }>(
      "SELECT run_id, traceparent FROM cairn_trace_contexts ORDER BY run_id",
    );
    expect(stored.map((r) => r.run_id)).toEqual(["tree", "tree:5"]);
    expect(stored[0]!.traceparent).toBe(`00-${start.spanContext().traceId}-${start.spanContext().spanId}-01`);
  });

  it("a failed run's span has status ERROR and the exception", async () => {
    const { provider, spans } = otel.local();
    const cairn = env.cairn(await env.database(), { tracerProvider: provider });
    const wf = cairn.workflow("doomed", async (ctx) => {
      await ctx.step("ok", () => 1);
      throw new RangeError("out of stock");
    });
    await cairn.launch();
    await expect((await wf.start(undefined, { id: "doomed-1" })).result()).rejects.toThrow("out of stock");
    // result() answers from the run's row, which is committed before the execution ends its span.
    await eventually(() => spans().named("run doomed").length === 1, 5_000);
    const run = spans().one("run doomed");
    expect(run.status).toEqual({ code: SpanStatusCode.ERROR, message: "out of stock" });
    expect(run.attributes["cairn.run.outcome"]).toBe("failed");
    expect(run.events[0]?.attributes).toMatchObject({ "exception.type": "RangeError", "exception.message": "out of stock" });
  });

  it("the trace context active at start() is the run's: caller → start → run → step → the step's own spans", async () => {
    const { spans } = otel.global();
    const cairn = env.cairn(await env.database());
    const tracer = trace.getTracer("app");
    const wf = cairn.workflow("traced", async (ctx) =>
      ctx.step("fetch", () => {
        // The application's own span inside a step is the step's child (the step's span is active).
        tracer.startSpan("http GET").end();
        return 1;
      }),
    );
    await cairn.launch();
    const handle = await tracer.startActiveSpan("POST /orders", async (request) => {
      try {
        return await wf.start(undefined, { id: "traced-1" });
      } finally {
        request.end();
      }
    });
    await handle.result();
    const all = spans();
    const request = all.one("POST /orders");
    const start = all.one("start traced");
    const run = all.one("run traced");
    const step = all.one("step fetch");
    expect(parentSpanId(start)).toBe(request.spanContext().spanId);
    expect(parentSpanId(run)).toBe(start.spanContext().spanId);
    expect(parentSpanId(step)).toBe(run.spanContext().spanId);
    expect(parentSpanId(all.one("http GET"))).toBe(step.spanContext().spanId);
    expect(new Set(all.all.map((s) => s.spanContext().traceId))).toEqual(new Set([request.spanContext().traceId]));
  });

  it("replay after an unload emits no second span for a step it did not redo", async () => {
    const { provider, spans } = otel.local();
    const cairn = env.cairn(await env.database(), { tracerProvider: provider });
    const wf = cairn.workflow("inbox", async (ctx) => {
      const a = await ctx.step("a", () => 1);
      const b = await ctx.step("b", () => 2);
      const message = await ctx.recv<number>("go");
      return ctx.step("c", () => a + b + (message ?? 0));
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "inbox-1" });
    await expect.poll(() => spans().named("run inbox").length).toBe(1);
    await cairn.send("inbox-1", "go", 10);
    expect(await run.result()).toBe(13);
    const all = spans();
    expect(all.named("step a")).toHaveLength(1);
    expect(all.named("step b")).toHaveLength(1);
    expect(all.named("step c")).toHaveLength(1);
    const runs = all.named("run inbox");
    expect(runs.map((r) => [r.attributes["cairn.run.outcome"], r.attributes["cairn.run.replayed_operations"]])).toEqual([
      ["suspended", 0],
      ["succeeded", 2],
    ]);
    expect(parentSpanId(all.one("step c"))).toBe(runs[1]!.spanContext().spanId);
  });

  it("cairn.resume() of a failed run: the recorded steps are replayed without spans, the failed one is done again", async () => {
    const { provider, spans } = otel.local();
    const cairn = env.cairn(await env.database(), { tracerProvider: provider });
    let broken = true;
    const wf = cairn.workflow("fragile", async (ctx) => {
      const a = await ctx.step("a", () => 1);
      const b = await ctx.step("b", () => 2);
      return a + b + (await ctx.step("c", () => (broken ? Promise.reject(new TerminalError("down")) : 3)));
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "fragile-1" });
    await expect(run.result()).rejects.toThrow("down");
    broken = false;
    expect(await cairn.resume("fragile-1")).toBe(true);
    expect(await run.result()).toBe(6);
    const all = spans();
    expect(all.named("step a")).toHaveLength(1);
    expect(all.named("step b")).toHaveLength(1);
    expect(all.named("step c").map((s) => s.status.code)).toEqual([SpanStatusCode.ERROR, SpanStatusCode.UNSET]);
    const runs = all.named("run fragile");
    expect(runs.map((r) => [r.attributes["cairn.run.outcome"], r.attributes["cairn.run.replayed_operations"]])).toEqual([
      ["failed", 0],
      ["succeeded", 2],
    ]);
    expect(new Set(all.all.map((s) => s.spanContext().traceId)).size).toBe(1);
  });

  it("a transaction and a fork are traced; a deleted run's trace context goes with it", async () => {
    const { provider, spans } = otel.local();
    const cairn = env.cairn(await env.database(), { tracerProvider: provider });
    const wf = cairn.workflow("ledger", async (ctx) => {
      const one = await ctx.step("one", () => 1);
      const rows = await ctx.transaction("count", async (sql) => sql.query<{ n: number | string }>("SELECT count(*) AS n FROM cairn_runs"));
      return one + Number(rows[0]!.n);
    });
    await cairn.launch();
    expect(await (await wf.start(undefined, { id: "ledger-1" })).result()).toBe(2);
    const original = spans().one("run ledger");
    const txn = spans().one("transaction count");
    expect(parentSpanId(txn)).toBe(original.spanContext().spanId);
    expect(txn.attributes).toMatchObject({ "cairn.step.kind": "transaction", "cairn.step.seq": 1 });

    // A fork has no start(): its first execution begins a trace of its own and stores it.
    const fork = await cairn.fork("ledger-1", { fromSeq: 1, id: "ledger-fork" });
    await fork.result();
    const forkRun = spans()
      .named("run ledger")
      .find((s) => s.attributes["cairn.run.id"] === "ledger-fork")!;
    expect(parentSpanId(forkRun)).toBeUndefined();
    expect(forkRun.spanContext().traceId).not.toBe(original.spanContext().traceId);
    expect(forkRun.attributes["cairn.run.replayed_operations"]).toBe(1);
    const contexts = async () =>
      (await storeOf(cairn).select<{ run_id: string; traceparent: string }>("SELECT run_id, traceparent FROM cairn_trace_contexts ORDER BY run_id")).map(
        (r) => [r.run_id, r.traceparent.split("-")[1]],
      );
    expect(await contexts()).toEqual([
      ["ledger-1", original.spanContext().traceId],
      ["ledger-fork", forkRun.spanContext().traceId],
    ]);

    await cairn.runs.delete({ ids: ["ledger-1"] });
    expect(await contexts()).toEqual([["ledger-fork", forkRun.spanContext().traceId]]);
  });

  it("a span processor that throws does not fail a run", async () => {
    const broken = {
      onStart: () => {
        throw new Error("processor broke on start");
      },
      onEnd: () => {
        throw new Error("processor broke on end");
      },
      forceFlush: async () => undefined,
      shutdown: async () => undefined,
    };
    const cairn = env.cairn(await env.database(), { tracerProvider: new BasicTracerProvider({ spanProcessors: [broken] }) });
    const wf = cairn.workflow("sturdy", async (ctx) => (await ctx.step("a", () => 1)) + (await ctx.child(child, 2).then((h) => h.result())));
    const child = cairn.workflow("sturdy-child", async (ctx, n: number) => ctx.step("b", () => n));
    await cairn.launch();
    expect(await (await wf.start(undefined, { id: "sturdy-1" })).result()).toBe(3);
  });

  it("with no SDK configured nothing is traced and nothing is stored", async () => {
    const cairn = env.cairn(await env.database());
    const wf = cairn.workflow("plain", async (ctx) => ctx.step("a", () => 1));
    await cairn.launch();
    expect(await (await wf.start(undefined, { id: "plain-1" })).result()).toBe(1);
    expect(await storeOf(cairn).select("SELECT run_id FROM cairn_trace_contexts")).toEqual([]);
  });
});

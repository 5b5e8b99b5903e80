import { SpanKind } from "@opentelemetry/api";
import { jsonSchema, simulateReadableStream, streamText, tool } from "ai";
import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { MockLanguageModel } from "../ai/sdk-matrix.js";
import { toolThenAnswer, usage } from "../ai/scripted-model.js";
import { otelFactory, parentSpanId } from "./otel-harness.js";

const orderInput = jsonSchema<{ id: number }>({ type: "object", properties: { id: { type: "number" } }, required: ["id"] });

describe.each(BACKENDS)("OpenTelemetry spans of agents on $name", (backend) => {
  const env = cairnFactory(backend);
  const otel = otelFactory();

  it("model calls and tool calls are GenAI spans with token usage; after an approval the replayed call gets no second span", async () => {
    const { provider, spans } = otel.local();
    const cairn = env.cairn(await env.database(), { tracerProvider: provider });
    const refunds: number[] = [];
    const model = toolThenAnswer("refund", { id: 42 }, { modelId: "mock-model-id" });
    const agent = cairn.agent("support", {
      model,
      system: "You resolve refunds.",
      temperature: 0.2,
      maxOutputTokens: 300,
      tools: { refund: tool({ inputSchema: orderInput, execute: async ({ id }) => (refunds.push(id), { refunded: id }) }) },
      permissions: { refund: "approve" },
    });
    await cairn.launch();
    const run = await agent.start({ prompt: "Refund order 42" }, { id: "ticket-42" });
    const [pending] = await eventually(async () => {
      const list = await cairn.approvals.list({ runId: "ticket-42" });
      return list.length > 0 ? list : undefined;
    });
    // The run unloads while it waits for a person.
    await eventually(() => spans().named("invoke_agent support").length === 1);
    await cairn.approvals.approve("ticket-42", pending!.toolCallId, { by: "ops" });
    const out = (await run.result()) as { text: string };
    expect(out.text).toContain("refunded");
    expect(refunds).toEqual([42]);
    expect(model.doGenerateCalls).toHaveLength(2);

    const all = spans();
    const runs = all.named("invoke_agent support");
    expect(runs.map((r) => r.attributes["cairn.run.outcome"])).toEqual(["suspended", "succeeded"]);
    for (const r of runs)
      expect(r.attributes).toMatchObject({ "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", "cairn.run.id": "ticket-42" });
    // Two model calls made, two spans: the first call's record was replayed after the approval.
    const chats = all.named("chat mock-model-id");
    expect(chats).toHaveLength(2);
    expect(parentSpanId(chats[0]!)).toBe(runs[0]!.spanContext().spanId);
    expect(parentSpanId(chats[1]!)).toBe(runs[1]!.spanContext().spanId);
    for (const chat of chats) {
      expect(chat.kind).toBe(SpanKind.CLIENT);
      expect(chat.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "mock-provider",
        "gen_ai.system": "mock-provider",
        "gen_ai.request.model": "mock-model-id",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 300,
        "gen_ai.response.model": "mock-model-id",
        "gen_ai.usage.input_tokens": usage().inputTokens.total,
        "gen_ai.usage.output_tokens": usage().outputTokens.total,
        "cairn.run.id": "ticket-42",
        "cairn.step.kind": "model",
        "cairn.attempt": 1,
      });
      expect(chat.attributes["gen_ai.response.id"]).toEqual(expect.any(String));
    }
    expect(chats.map((c) => c.attributes["gen_ai.response.finish_reasons"])).toEqual([["tool-calls"], ["stop"]]);

    const toolSpan = all.one("execute_tool refund");
    expect(toolSpan.attributes).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "refund",
      "gen_ai.tool.call.id": pending!.toolCallId,
      "gen_ai.tool.type": "function",
      "cairn.step.kind": "tool",
      "cairn.tool.status": "succeeded",
    });
    expect(parentSpanId(toolSpan)).toBe(runs[1]!.spanContext().spanId);
    expect(new Set(all.all.map((s) => s.spanContext().traceId)).size).toBe(1);
  });

  it("a streamed model call's span reads the answer from its parts", async () => {
    const { provider, spans } = otel.local();
    const cairn = env.cairn(await env.database(), { tracerProvider: provider });
    const model = new MockLanguageModel({
      modelId: "streamer",
      doStream: async () => ({
        stream: simulateReadableStream({
          chunks: [
            { type: "stream-start", warnings: [] },
            { type: "response-metadata", id: "resp-1", modelId: "streamer-2025" },
            { type: "text-start", id: "t" },
            { type: "text-delta", id: "t", delta: "Hello" },
            { type: "text-end", id: "t" },
            { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: usage(11, 3) },
          ],
        }),
      }),
    });
    const wf = cairn.workflow("teller", async (ctx) => {
      let text = "";
      for await (const delta of streamText({ model: ctx.model(model), prompt: "Hi" }).textStream) text += delta;
      return text;
    });
    await cairn.launch();
    expect(await (await wf.start(undefined, { id: "tell-1" })).result()).toBe("Hello");
    expect(spans().one("chat streamer").attributes).toMatchObject({
      "gen_ai.request.model": "streamer",
      "gen_ai.response.model": "streamer-2025",
      "gen_ai.usage.input_tokens": 11,
      "gen_ai.usage.output_tokens": 3,
      "gen_ai.response.finish_reasons": ["stop"],
      "cairn.model.streamed": true,
    });
  });
});

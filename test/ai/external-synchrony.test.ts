import { generateText, jsonSchema, tool, type ModelMessage } from "ai";
import { describe, expect, it } from "vitest";
import { storeOf } from "../../src/internal.js";
import type { DurabilityWatermark } from "../../src/store/store.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { MockLanguageModel } from "./sdk-matrix.js";
import { answer, toolCall, toolOutputs } from "./scripted-model.js";

// External synchrony (`deferModelCallFsync`), observed through the store's durability watermark:
// `deferred` counts commits that resolved without an fsync / WAL flush, `durable` how many of them
// a barrier has made durable since. A power loss cannot be simulated on SQLite (the PostgreSQL
// case, with a real crash of the server, is test/faults/external-synchrony.test.ts); what is
// checked here, on both backends, is the order: whenever code that acts on the world runs (a step's
// function, a tool's execute), no commit of the store is still at risk (durable === deferred).

describe.each(BACKENDS)("external synchrony on $name", (backend) => {
  const env = cairnFactory(backend);
  const snapshot = (w: DurabilityWatermark) => ({ deferred: w.deferred, durable: w.durable });

  it("model calls commit without an fsync, and every effect waits for one", async () => {
    const cairn = env.cairn(await env.database());
    const watermark = storeOf(cairn).durability;
    const model = new MockLanguageModel({ doGenerate: async (call) => answer([{ type: "text", text: `answer ${call.prompt.length}` }]) });
    const atEffects: { deferred: number; durable: number }[] = [];
    const afterModels: { deferred: number; durable: number }[] = [];
    const wf = cairn.workflow("es", async (ctx) => {
      const messages: ModelMessage[] = [];
      for (let turn = 0; turn < 3; turn++) {
        // Two model calls in a row: the second needs no barrier.
        for (let call = 0; call < 2; call++) {
          messages.push({ role: "user", content: `question ${turn}.${call}` });
          const reply = await generateText({ model: ctx.model(model, { deferModelCallFsync: true }), messages, maxRetries: 0 });
          messages.push({ role: "assistant", content: reply.text });
          afterModels.push(snapshot(watermark));
        }
        await ctx.step("effect", () => void atEffects.push(snapshot(watermark)));
      }
      return messages.length;
    });
    await cairn.launch();
    expect(await (await wf.start(undefined)).result()).toBe(12);
    expect(atEffects).toHaveLength(3);
    for (const at of atEffects) expect(at.durable).toBe(at.deferred);
    // Each model call resolved without waiting: the count grew by one per call.
    expect(afterModels.map((w) => w.deferred)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(atEffects.map((w) => w.durable)).toEqual([2, 4, 6]);
  });

  it("by default every model call waits for its own fsync (nothing deferred)", async () => {
    const cairn = env.cairn(await env.database());
    const model = new MockLanguageModel({ doGenerate: async () => answer([{ type: "text", text: "ok" }]) });
    const wf = cairn.workflow("es-default", async (ctx) => {
      await generateText({ model: ctx.model(model), prompt: "hi", maxRetries: 0 });
      await ctx.step("effect", () => 1);
      return (await generateText({ model: ctx.model(model), prompt: "again", maxRetries: 0 })).text;
    });
    await cairn.launch();
    expect(await (await wf.start(undefined)).result()).toBe("ok");
    expect(snapshot(storeOf(cairn).durability)).toEqual({ deferred: 0, durable: 0 });
  });

  it("an agent's tool executes only once the model call that asked for it is durable", async () => {
    const cairn = env.cairn(await env.database());
    const watermark = storeOf(cairn).durability;
    const atTool: { deferred: number; durable: number }[] = [];
    const model = new MockLanguageModel({
      doGenerate: async (call) =>
        toolOutputs(call).length < 2
          ? answer([toolCall("lookUp", { n: toolOutputs(call).length }, `call-${toolOutputs(call).length}`)], "tool-calls")
          : answer([{ type: "text", text: "done" }]),
    });
    const agent = cairn.agent("es-agent", {
      model,
      deferModelCallFsync: true,
      tools: {
        lookUp: tool({
          inputSchema: jsonSchema<{ n: number }>({ type: "object", properties: { n: { type: "number" } } }),
          execute: async ({ n }) => {
            atTool.push(snapshot(watermark));
            return { n };
          },
        }),
      },
    });
    await cairn.launch();
    const output = await (await agent.start({ prompt: "look twice" })).result();
    expect(output.text).toBe("done");
    expect(atTool).toHaveLength(2);
    for (const at of atTool) {
      expect(at.deferred).toBeGreaterThan(0);
      expect(at.durable).toBe(at.deferred);
    }
  });

  it("a streamed model call is never deferred (its parts reach readers)", async () => {
    const cairn = env.cairn(await env.database());
    const { streamText } = await import("ai");
    const model = new MockLanguageModel({
      doStream: async () => ({
        stream: new ReadableStream({
          start(controller) {
            controller.enqueue({ type: "stream-start", warnings: [] });
            controller.enqueue({ type: "text-start", id: "t" });
            controller.enqueue({ type: "text-delta", id: "t", delta: "streamed" });
            controller.enqueue({ type: "text-end", id: "t" });
            controller.enqueue({
              type: "finish",
              finishReason: { unified: "stop", raw: "stop" },
              usage: answer([]).usage,
            });
            controller.close();
          },
        }),
      }),
    });
    const wf = cairn.workflow("es-stream", async (ctx) => {
      const result = streamText({ model: ctx.model(model, { deferModelCallFsync: true }), prompt: "hi", maxRetries: 0 });
      return await result.text;
    });
    await cairn.launch();
    expect(await (await wf.start(undefined)).result()).toBe("streamed");
    expect(storeOf(cairn).durability.deferred).toBe(0);
  });
});

import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { streamText } from "ai";
import { afterEach, describe, expect, it } from "vitest";
import { startMockLlm, type MockLlm } from "../../src/testing/mock-llm/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { storeOf } from "../../src/internal.js";

const STORY = "Once upon a time a cairn marked the way, stone by stone, so nobody got lost twice.";

describe.each(BACKENDS)("durable streams on $name", (backend) => {
  const env = cairnFactory(backend);
  let llm: MockLlm | undefined;
  afterEach(async () => {
    await llm?.close();
    llm = undefined;
  });

  it("streams to the caller and to readers elsewhere, records the call, and replays it without the provider", async () => {
    llm = await startMockLlm({ script: { rules: [{ reply: { content: STORY } }] } });
    const db = await env.database();
    const writer = env.cairn(db);
    const provider = createOpenAICompatible({ name: "mock", baseURL: llm.url });
    const body = async (ctx: import("../../src/ai/index.js").AgentContext) => {
      const result = streamText({ model: ctx.model(provider.chatModel("mock-1")), prompt: "Tell a story", maxRetries: 0 });
      let text = "";
      for await (const delta of result.textStream) text += delta;
      await ctx.recv("done");
      return text;
    };
    const wf = writer.workflow("storyteller", body);
    await writer.launch();
    await wf.start(undefined, { id: "story" });

    // A reader in "another process": its own Cairn on the same database.
    const reader = env.cairn(db);
    const chunks: { kind: string; text: string; offset: string }[] = [];
    const reading = (async () => {
      for await (const chunk of reader.stream("story")) chunks.push(chunk);
    })();
    await eventually(() => chunks.some((c) => c.kind === "finish"));
    expect(
      chunks
        .filter((c) => c.kind === "text")
        .map((c) => c.text)
        .join(""),
    ).toBe(STORY);
    const resumed: string[] = [];
    for await (const chunk of reader.stream("story", { after: chunks[1]!.offset })) {
      resumed.push(chunk.text);
      if (chunk.kind === "finish") break;
    }
    expect(resumed.join("")).toBe(
      chunks
        .slice(2)
        .map((c) => c.text)
        .join(""),
    );

    // Restart: the recorded stream replays; the provider is not asked again.
    await writer.shutdown();
    const again = env.cairn(db);
    again.workflow("storyteller", body);
    await again.launch();
    await again.send("story", "done", null);
    expect(await again.run("story").result()).toBe(STORY);
    expect(llm.requestCount()).toBe(1);
    await reading;
    const calls = await storeOf(again).query("SELECT streamed, finish_reason FROM cairn_model_calls WHERE run_id = 'story'");
    expect(calls.rows.map((r) => [Number(r.streamed), r.finish_reason])).toEqual([[1, "stop"]]);
  });

  it("survives a reader that stops reading before the record commits", async () => {
    llm = await startMockLlm({ script: { rules: [{ reply: { content: STORY } }] } });
    const cairn = env.cairn(await env.database());
    const provider = createOpenAICompatible({ name: "mock", baseURL: llm.url });
    const wf = cairn.workflow("impatient", async (ctx) => {
      let first = "";
      for await (const delta of streamText({ model: ctx.model(provider.chatModel("mock-1")), prompt: "Tell a story" }).textStream) {
        first = delta;
        break;
      }
      return ctx.step("after", () => first.length > 0);
    });
    await cairn.launch();
    expect(await (await wf.start(undefined)).result()).toBe(true);
  });

  it("rebuilds a stream cut short by a crash from the record", async () => {
    llm = await startMockLlm({ script: { rules: [{ reply: { content: STORY } }] } });
    const db = await env.database();
    const cairn = env.cairn(db);
    await storeOf(cairn).migrate();
    // What a crashed first attempt left behind: half a stream, with text the provider never repeats.
    await storeOf(cairn).commit(null, [
      {
        type: "insert",
        table: "cairn_stream_chunks",
        values: { run_id: "cut", model_seq: 0, position: 0, kind: "text", chunk: "GARBLED", created_at: 1 },
      },
      { type: "insert", table: "cairn_stream_chunks", values: { run_id: "cut", model_seq: 0, position: 999, kind: "text", chunk: "MORE", created_at: 1 } },
    ]);
    const provider = createOpenAICompatible({ name: "mock", baseURL: llm.url });
    const wf = cairn.workflow("cut-story", async (ctx) => {
      let text = "";
      for await (const delta of streamText({ model: ctx.model(provider.chatModel("mock-1")), prompt: "Tell a story" }).textStream) text += delta;
      return text;
    });
    await cairn.launch();
    expect(await (await wf.start(undefined, { id: "cut" })).result()).toBe(STORY);
    const text: string[] = [];
    for await (const chunk of cairn.stream("cut")) if (chunk.kind === "text") text.push(chunk.text);
    expect(text.join("")).toBe(STORY);
  });
});

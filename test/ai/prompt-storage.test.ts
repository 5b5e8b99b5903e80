import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, type ModelMessage } from "ai";
import { afterEach, describe, expect, it } from "vitest";
import { expandPromptMessages } from "../../src/ai/model-call-record.js";
import { startMockLlm, type MockLlm } from "../../src/testing/mock-llm/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { storeOf } from "../../src/internal.js";
import { MockLanguageModel, responseMessages, systemInMessages } from "./sdk-matrix.js";
import { answer } from "./scripted-model.js";

describe.each(BACKENDS)("prompt storage on $name", (backend) => {
  const env = cairnFactory(backend);
  let llm: MockLlm | undefined;
  afterEach(async () => {
    await llm?.close();
    llm = undefined;
  });

  it("stores a growing conversation as deltas that expand to every message, each message once", async () => {
    llm = await startMockLlm({ script: { rules: [{ reply: { content: "Answer to: {{prompt}}" } }] } });
    const cairn = env.cairn(await env.database());
    const provider = createOpenAICompatible({ name: "mock", baseURL: llm.url });
    const wf = cairn.workflow("chat", async (ctx) => {
      const messages: ModelMessage[] = [{ role: "system", content: "Be brief." }];
      for (let turn = 0; turn < 5; turn++) {
        messages.push({ role: "user", content: `Question ${turn}` });
        const result = await generateText({ model: ctx.model(provider.chatModel("mock-1")), messages, ...systemInMessages });
        messages.push(...responseMessages(result));
      }
      return messages.length;
    });
    await cairn.launch();
    expect(await (await wf.start(undefined, { id: "chat" })).result()).toBe(11);
    const rows = await storeOf(cairn).select<{ seq: number; prompt_messages: string }>(
      "SELECT seq, prompt_messages FROM cairn_model_calls WHERE run_id = 'chat' ORDER BY seq",
    );
    expect(rows).toHaveLength(5);
    expect(Array.isArray(JSON.parse(rows[0]!.prompt_messages))).toBe(true);
    for (const row of rows.slice(1)) expect(JSON.parse(row.prompt_messages)).toMatchObject({ after: expect.any(Number) });
    const bySeq = new Map(rows.map((r) => [Number(r.seq), r.prompt_messages]));
    const last = await expandPromptMessages(rows[4]!.prompt_messages, async (seq) => bySeq.get(seq));
    expect(last).toHaveLength(10); // system + 5 questions + 4 answers
    expect(new Set(last).size).toBe(10);
    const payloads = await storeOf(cairn).select<{ n: number }>(
      `SELECT count(*) AS n FROM cairn_payloads WHERE hash IN (${last.map((_, i) => `$${i + 1}`).join(", ")})`,
      last,
    );
    expect(Number(payloads[0]!.n)).toBe(10);
  });

  it("writes the payloads of a failed call's prompt with the next call that sends them", async () => {
    let calls = 0;
    const model = new MockLanguageModel({
      doGenerate: async () => {
        if (++calls === 1) throw new Error("provider down");
        return answer([{ type: "text", text: "ok" }]);
      },
    });
    const cairn = env.cairn(await env.database());
    const wf = cairn.workflow("retry-by-hand", async (ctx) => {
      const messages: ModelMessage[] = [{ role: "user", content: "a question long enough to be a message of its own" }];
      try {
        await generateText({ model: ctx.model(model), messages, maxRetries: 0 });
      } catch {
        // the first call failed and was recorded failed: its prompt's payloads were never committed
      }
      return (await generateText({ model: ctx.model(model), messages, maxRetries: 0 })).text;
    });
    await cairn.launch();
    expect(await (await wf.start(undefined, { id: "retry" })).result()).toBe("ok");
    const rows = await storeOf(cairn).select<{ prompt_messages: string }>("SELECT prompt_messages FROM cairn_model_calls WHERE run_id = 'retry'");
    expect(rows).toHaveLength(1);
    const hashes = await expandPromptMessages(rows[0]!.prompt_messages, async () => undefined);
    expect(hashes).toHaveLength(1);
    const payloads = await storeOf(cairn).select<{ n: number }>("SELECT count(*) AS n FROM cairn_payloads WHERE hash = $1", hashes);
    expect(Number(payloads[0]!.n)).toBe(1);
  });
});

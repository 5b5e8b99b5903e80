import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { afterEach, describe, expect, it } from "vitest";
import { startMockLlm, type MockLlm } from "../../src/testing/mock-llm/index.js";
import type { MockScript } from "../../src/testing/mock-llm/script.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { storeOf } from "../../src/internal.js";

function faulty(fault: { status?: number; delayMs?: number; malformed?: boolean }, times: number): MockScript {
  return { rules: [{ reply: { content: "fine now" }, fault: { ...fault, times } }] };
}

describe.each(BACKENDS)("provider errors on $name", (backend) => {
  const env = cairnFactory(backend);
  let llm: MockLlm | undefined;
  afterEach(async () => {
    await llm?.close();
    llm = undefined;
  });

  it.each([
    ["an HTTP 500", { status: 500 }],
    ["a timeout", { delayMs: 5_000 }],
  ])("retries %s, records one call, and keeps the journal whole", async (_what, fault) => {
    llm = await startMockLlm({ script: faulty(fault, 1) });
    const cairn = env.cairn(await env.database());
    const provider = createOpenAICompatible({ name: "mock", baseURL: llm.url });
    const agent = cairn.agent("flaky", { model: provider.chatModel("mock-1"), modelRetries: 2, modelTimeoutMs: 500 });
    await cairn.launch();
    const out = await (await agent.start({ prompt: "hello" }, { id: "flaky" })).result();
    expect(out.text).toBe("fine now");
    expect(llm.requestCount()).toBe(2);
    const journal = await storeOf(cairn).loadJournal("flaky");
    expect(journal.map((s) => [s.kind, s.status, s.attempts])).toEqual([["model", "succeeded", 2]]);
    const calls = await storeOf(cairn).query("SELECT count(*) AS n FROM cairn_model_calls WHERE run_id = 'flaky'");
    expect(Number(calls.rows[0]!.n)).toBe(1);
  });

  it("does not retry what the provider marks not retryable (a malformed 200 body): isRetryable is honoured", async () => {
    llm = await startMockLlm({ script: faulty({ malformed: true }, 1) });
    const cairn = env.cairn(await env.database());
    const provider = createOpenAICompatible({ name: "mock", baseURL: llm.url });
    const agent = cairn.agent("malformed", { model: provider.chatModel("mock-1"), modelRetries: 2 });
    await cairn.launch();
    const error = (await (await agent.start({ prompt: "hello" }, { id: "malformed" })).result().catch((e: unknown) => e)) as Error;
    expect(error.name).toBe("AI_APICallError");
    expect(llm.requestCount()).toBe(1);
    const journal = await storeOf(cairn).loadJournal("malformed");
    expect(journal.map((s) => [s.kind, s.status, s.attempts])).toEqual([["model", "failed", 1]]);
  });

  it("records a call that keeps failing, so replay fails the same way", async () => {
    llm = await startMockLlm({ script: faulty({ status: 503 }, 100) });
    const db = await env.database();
    const cairn = env.cairn(db);
    const provider = createOpenAICompatible({ name: "mock", baseURL: llm.url });
    const agent = cairn.agent("down", { model: provider.chatModel("mock-1"), modelRetries: 1 });
    await cairn.launch();
    const error = (await (await agent.start({ prompt: "hello" }, { id: "down" })).result().catch((e: unknown) => e)) as Error;
    expect(error.name).toBe("AI_APICallError");
    const journal = await storeOf(cairn).loadJournal("down");
    expect(journal.map((s) => [s.kind, s.status, s.attempts])).toEqual([["model", "failed", 2]]);
    expect(llm.requestCount()).toBe(2);
  });
});

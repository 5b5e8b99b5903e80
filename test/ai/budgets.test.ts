import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { jsonSchema, tool } from "ai";
import { afterEach, describe, expect, it } from "vitest";
import { BudgetExceededError, type Cairn } from "../../src/index.js";
import type { AgentSpec } from "../../src/ai/agent.js";
import { REFUND_SCRIPT, startMockLlm, type MockLlm } from "../../src/testing/mock-llm/index.js";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { storeOf } from "../../src/internal.js";

const anyInput = jsonSchema<Record<string, unknown>>({ type: "object", properties: {} });

describe.each(BACKENDS)("budgets and permissions on $name", (backend) => {
  const env = cairnFactory(backend);
  let llm: MockLlm | undefined;
  afterEach(async () => {
    await llm?.close();
    llm = undefined;
  });

  async function refundAgent(cairn: Cairn, spec: Partial<AgentSpec>, onLookUp: () => void = () => undefined) {
    llm ??= await startMockLlm({ script: REFUND_SCRIPT });
    const provider = createOpenAICompatible({ name: "mock", baseURL: llm.url });
    const refunds: string[] = [];
    const agent = cairn.agent("refunds", {
      model: provider.chatModel("mock-1"),
      tools: {
        lookUpOrder: tool({ inputSchema: anyInput, execute: async () => (onLookUp(), { totalCents: 4200 }) }),
        refund: tool({ inputSchema: anyInput, execute: async (input) => (refunds.push(JSON.stringify(input)), { ok: true }) }),
      },
      ...spec,
    });
    return { agent, refunds };
  }

  it.each([
    ["tokens", { tokens: 3 }, "tokens budget"],
    ["usd", { usd: 0.000001 }, "usd budget"],
  ] as const)("stops at the %s budget before the next model call", async (_kind, budget, message) => {
    const cairn = env.cairn(await env.database());
    const { agent, refunds } = await refundAgent(cairn, { budget, pricing: { inputPerMillion: 1, outputPerMillion: 1 } });
    await cairn.launch();
    const error = await (await agent.start({ prompt: "Refund order 5" })).result().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BudgetExceededError);
    expect((error as Error).message).toContain(message);
    expect(llm!.requestCount()).toBe(1);
    expect(refunds).toEqual([]);
  });

  it("stops at the wall-time budget", async () => {
    const clock = new ManualClock();
    const cairn = env.cairn(await env.database(), { clock });
    const { agent } = await refundAgent(cairn, { budget: { wallTimeMs: 5_000 } }, () => clock.advance(6_000));
    await cairn.launch();
    const error = await (await agent.start({ prompt: "Refund order 5" })).result().catch((e: unknown) => e);
    expect((error as Error).message).toContain("wallTimeMs budget: spent 6000 of 5000");
    expect(llm!.requestCount()).toBe(1);
  });

  it('waits for an approval to raise a spent budget with onBudgetExceeded: "ask"', async () => {
    const cairn = env.cairn(await env.database());
    const { agent, refunds } = await refundAgent(cairn, { budget: { modelCalls: 1 }, onBudgetExceeded: "ask" });
    await cairn.launch();
    const run = await agent.start({ prompt: "Refund order 5" }, { id: "asker" });
    const [request] = await eventually(async () => {
      const pending = await cairn.approvals.list({ runId: "asker" });
      return pending.length > 0 ? pending : undefined;
    });
    expect(request).toMatchObject({ toolName: "modelCalls", input: { budget: "modelCalls", limit: 1, spent: 1 } });
    await eventually(async () => (await run.status()).status === "waiting");
    await cairn.approvals.approve("asker", request!.toolCallId, { by: "finance" });
    // The raise doubles the limit (2 calls); the third call asks again.
    const second = await eventually(async () => {
      const pending = await cairn.approvals.list({ runId: "asker" });
      return pending.length > 0 ? pending : undefined;
    });
    await cairn.approvals.approve("asker", second[0]!.toolCallId, { by: "finance" });
    expect((await run.result()).text).toContain("Refunded order 5");
    expect(refunds).toHaveLength(1);
    expect(llm!.requestCount()).toBe(3);
  });

  it("lets a permission function decide per input, and records its decision", async () => {
    const cairn = env.cairn(await env.database());
    const decided: unknown[] = [];
    const { agent, refunds } = await refundAgent(cairn, {
      permissions: {
        refund: (input) => {
          decided.push(input);
          return Number((input as { amountCents: number }).amountCents) > 10_000 ? "approve" : "allow";
        },
      },
    });
    await cairn.launch();
    const run = await agent.start({ prompt: "Refund order 77" }, { id: "small" });
    expect((await run.result()).text).toContain("Refunded order 77");
    expect(refunds).toHaveLength(1);
    expect(decided).toHaveLength(1);
    const journal = await storeOf(cairn).loadJournal("small");
    expect(journal.filter((s) => s.name === "permission:refund").map((s) => s.output)).toEqual(['"allow"']);
  });
});

import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { jsonSchema, tool } from "ai";
import { afterEach, describe, expect, it } from "vitest";
import { BudgetExceededError, type Cairn } from "../../src/index.js";
import { idempotencyKey } from "../../src/ai/index.js";
import { REFUND_SCRIPT, startMockLlm, type MockLlm } from "../../src/testing/mock-llm/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { storeOf } from "../../src/internal.js";

const orderInput = jsonSchema<{ id: string | number }>({ type: "object", properties: { id: {} }, required: ["id"] });
const refundInput = jsonSchema<{ id: string | number; amountCents: number | string }>({
  type: "object",
  properties: { id: {}, amountCents: {} },
  required: ["id", "amountCents"],
});

describe.each(BACKENDS)("agents on $name", (backend) => {
  const env = cairnFactory(backend);
  let llm: MockLlm | undefined;
  afterEach(async () => {
    await llm?.close();
    llm = undefined;
  });

  /** A support agent on the mock model; `ledger` records refunds by idempotency key. */
  function supportAgent(
    cairn: Cairn,
    url: string,
    ledger: Map<string, number>,
    options: { permissions?: "approve" | "deny" | "allow"; budget?: object } = {},
  ) {
    const provider = createOpenAICompatible({ name: "mock", baseURL: url });
    return cairn.agent("support", {
      model: provider.chatModel("mock-1"),
      system: "You resolve refund requests.",
      tools: {
        lookUpOrder: tool({ inputSchema: orderInput, execute: async ({ id }) => ({ id, totalCents: 4200 }) }),
        refund: tool({
          inputSchema: refundInput,
          execute: async ({ id }, options) => {
            const key = idempotencyKey(options);
            ledger.set(key, (ledger.get(key) ?? 0) + 1);
            return { refunded: id, key };
          },
        }),
      },
      permissions: { refund: options.permissions ?? "approve" },
      ...(options.budget === undefined ? {} : { budget: options.budget }),
      pricing: { inputPerMillion: 0.15, outputPerMillion: 0.6 },
    });
  }

  it("resolves a ticket through an approval that survives a restart, without repeating a model call", async () => {
    llm = await startMockLlm({ script: REFUND_SCRIPT });
    const db = await env.database();
    const ledger = new Map<string, number>();
    const first = env.cairn(db);
    const support = supportAgent(first, llm.url, ledger);
    await first.launch();
    const run = await support.start({ prompt: "Refund order 42" }, { id: "ticket-42" });
    const [pending] = await eventually(async () => {
      const list = await first.approvals.list({ runId: "ticket-42" });
      return list.length > 0 ? list : undefined;
    });
    expect(pending).toMatchObject({ runId: "ticket-42", toolName: "refund" });
    expect(String((pending!.input as { id: unknown }).id)).toBe("42");
    expect(llm.requestCount()).toBe(2);
    await first.shutdown();

    const second = env.cairn(db);
    supportAgent(second, llm.url, ledger);
    await second.launch();
    await second.approvals.approve("ticket-42", pending!.toolCallId, { by: "ops" });
    const out = await second.run<{ text: string; steps: number; usage: { totalTokens: number }; costUsd: number }>(run.id).result();
    expect(out.text).toContain("Refunded order 42");
    expect(out.steps).toBe(3);
    expect(out.usage.totalTokens).toBeGreaterThan(0);
    expect(out.costUsd).toBeGreaterThan(0);
    expect(llm.requestCount()).toBe(3);
    expect([...ledger.values()]).toEqual([1]);
    await expect(second.approvals.approve("ticket-42", pending!.toolCallId)).rejects.toThrow(/already decided/);

    const provenance = await storeOf(second).query(
      "SELECT tool_name, tool_status, decided_by, model_seq, model_id FROM cairn_provenance WHERE run_id = 'ticket-42' ORDER BY tool_seq",
    );
    expect(provenance.rows.map((r) => [r.tool_name, r.tool_status, r.decided_by, r.model_id])).toEqual([
      ["lookUpOrder", "succeeded", null, "mock-1"],
      ["refund", "succeeded", "ops", "mock-1"],
    ]);
    const costs = await storeOf(second).query("SELECT model_calls, total_tokens, cost_usd FROM cairn_costs WHERE run_id = 'ticket-42'");
    expect(Number(costs.rows[0]!.model_calls)).toBe(3);
  });

  it("never runs a denied tool and tells the model so", async () => {
    llm = await startMockLlm({ script: REFUND_SCRIPT });
    const cairn = env.cairn(await env.database());
    const ledger = new Map<string, number>();
    const support = supportAgent(cairn, llm.url, ledger, { permissions: "deny" });
    await cairn.launch();
    const out = await (await support.start({ prompt: "Refund order 7" })).result();
    expect(ledger.size).toBe(0);
    expect(out.steps).toBe(3);
    const denied = llm.requests().at(-1);
    expect(JSON.stringify(denied)).toContain("Permission denied");
  });

  it("stops before a model call once a budget is spent, naming the budget", async () => {
    llm = await startMockLlm({ script: REFUND_SCRIPT });
    const cairn = env.cairn(await env.database());
    const support = supportAgent(cairn, llm.url, new Map(), { permissions: "allow", budget: { modelCalls: 2 } });
    await cairn.launch();
    const error = await (await support.start({ prompt: "Refund order 9" }, { id: "capped" })).result().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BudgetExceededError);
    expect((error as Error).message).toContain("modelCalls budget: spent 2 of 2");
    expect(llm.requestCount()).toBe(2);
  });
});

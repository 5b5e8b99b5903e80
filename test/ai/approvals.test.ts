import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, jsonSchema, stepCountIs, tool } from "ai";
import { afterEach, describe, expect, it } from "vitest";
import type { Cairn } from "../../src/index.js";
import { REFUND_SCRIPT, startMockLlm, type MockLlm } from "../../src/testing/mock-llm/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { storeOf } from "../../src/internal.js";

const anyInput = jsonSchema<Record<string, unknown>>({ type: "object", properties: {} });

describe.each(BACKENDS)("approvals on $name", (backend) => {
  const env = cairnFactory(backend);
  let llm: MockLlm | undefined;
  afterEach(async () => {
    await llm?.close();
    llm = undefined;
  });

  async function pending(cairn: Cairn, runId: string) {
    return eventually(async () => {
      const list = await cairn.approvals.list({ runId });
      return list.length > 0 ? list[0]! : undefined;
    });
  }

  /** A workflow running its own loop twice in one run: the mock's tool call ids repeat. */
  async function twice(cairn: Cairn) {
    llm ??= await startMockLlm({ script: REFUND_SCRIPT });
    const provider = createOpenAICompatible({ name: "mock", baseURL: llm.url });
    const refunds: unknown[] = [];
    const wf = cairn.workflow("two-tickets", async (ctx, orders: number[]) => {
      const texts: string[] = [];
      for (const order of orders) {
        const result = await generateText({
          model: ctx.model(provider.chatModel("mock-1")),
          prompt: `Refund order ${order}`,
          tools: ctx.tools(
            {
              lookUpOrder: tool({ inputSchema: anyInput, execute: async () => ({ totalCents: 100 }) }),
              refund: tool({ inputSchema: anyInput, execute: async (input) => (refunds.push(input), { ok: true }) }),
            },
            { refund: "approve" },
          ),
          stopWhen: stepCountIs(5),
        });
        texts.push(result.text);
      }
      return texts;
    });
    return { wf, refunds };
  }

  it("keeps requests apart when a run reuses a tool call id, and withdraws them with a cancel", async () => {
    const cairn = env.cairn(await env.database());
    const { wf, refunds } = await twice(cairn);
    await cairn.launch();
    const run = await wf.start([1, 2], { id: "two" });
    const first = await pending(cairn, "two");
    await cairn.approvals.approve("two", first.toolCallId, { by: "ops" });
    const second = await eventually(async () => {
      const list = await cairn.approvals.list({ runId: "two" });
      return list.length > 0 && list[0]!.toolCallId === first.toolCallId ? list[0] : undefined;
    });
    expect(second.kind).toBe("tool");
    await run.cancel();
    expect(await cairn.approvals.list({ runId: "two" })).toEqual([]);
    await run.resume();
    const reopened = await pending(cairn, "two");
    await cairn.approvals.approve("two", reopened.toolCallId, { by: "ops" });
    expect(await run.result()).toHaveLength(2);
    expect(refunds).toHaveLength(2);
  });

  it("lets a fork made after an approval request be approved on its own", async () => {
    const cairn = env.cairn(await env.database());
    const { wf, refunds } = await twice(cairn);
    await cairn.launch();
    const run = await wf.start([3], { id: "orig" });
    const request = await pending(cairn, "orig");
    await cairn.approvals.approve("orig", request.toolCallId, { by: "ops" });
    await run.result();
    const requestStep = (await storeOf(cairn).loadJournal("orig")).find((s) => s.name === "request-approval:refund")!;
    const fork = await cairn.fork("orig", { fromSeq: requestStep.seq + 1, id: "orig-fork" });
    const again = await pending(cairn, "orig-fork");
    await cairn.approvals.deny("orig-fork", again.toolCallId, { by: "ops", reason: "second look" });
    expect((await fork.result()) as string[]).toHaveLength(1);
    expect(refunds).toHaveLength(1);
    const calls = await storeOf(cairn).query("SELECT count(*) AS n FROM cairn_model_calls WHERE run_id = 'orig-fork'");
    expect(Number(calls.rows[0]!.n)).toBe(3);
  });
});

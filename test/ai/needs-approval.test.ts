import type { LanguageModelV3StreamPart } from "@ai-sdk/provider";
import { generateText, jsonSchema, simulateReadableStream, stepCountIs, streamText, tool } from "ai";
import { MockLanguageModel } from "./sdk-matrix.js";
import { describe, expect, it } from "vitest";
import type { Cairn } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { toolOutputs, toolThenAnswer, usage } from "./scripted-model.js";
import { storeOf } from "../../src/internal.js";

const refundInput = jsonSchema<{ amountCents: number }>({
  type: "object",
  properties: { amountCents: { type: "number" } },
  required: ["amountCents"],
});

/**
 * AI SDK 6's `needsApproval` on a tool is a Cairn approval: the same cairn_approvals row, the same
 * `cairn.approvals` calls, the run waiting without memory — and a denial reaches the model as the
 * SDK's `execution-denied` tool output. Never dropped silently.
 */
describe.each(BACKENDS)("needsApproval on $name", (backend) => {
  const env = cairnFactory(backend);

  async function pending(cairn: Cairn, runId: string) {
    return eventually(async () => (await cairn.approvals.list({ runId }))[0]);
  }

  function refundTool(refunds: number[], needsApproval: boolean | ((input: { amountCents: number }) => boolean)) {
    return tool({
      inputSchema: refundInput,
      needsApproval,
      execute: async ({ amountCents }) => (refunds.push(amountCents), { refunded: amountCents }),
    });
  }

  function toolRows(cairn: Cairn, runId: string) {
    return storeOf(cairn).select<{ tool_name: string; status: string; permission: string; decided_by: string | null }>(
      "SELECT tool_name, status, permission, decided_by FROM cairn_tool_calls WHERE run_id = $1 ORDER BY seq",
      [runId],
    );
  }

  it("waits for an approval in cairn.agent, across a restart, and runs the tool once approved", async () => {
    const db = await env.database();
    const model = toolThenAnswer("refund", { amountCents: 500 });
    const refunds: number[] = [];
    const define = (cairn: Cairn) => cairn.agent("support", { model, tools: { refund: refundTool(refunds, true) } });

    const first = env.cairn(db, { pollIntervalMs: 50 });
    const agent = define(first);
    await first.launch();
    await agent.start({ prompt: "Refund 5 dollars" }, { id: "t1" });
    const request = await pending(first, "t1");
    expect(request).toMatchObject({ kind: "tool", toolName: "refund", input: { amountCents: 500 } });
    expect(refunds).toEqual([]);
    await first.shutdown();

    const second = env.cairn(db, { pollIntervalMs: 50 });
    define(second);
    await second.launch();
    await second.approvals.approve("t1", request.toolCallId, { by: "ops" });
    const out = await second.run<{ text: string }>("t1").result();
    expect(out.text).toBe('tool said {"type":"json","value":{"refunded":500}}');
    expect(refunds).toEqual([500]);
    expect(model.doGenerateCalls).toHaveLength(2); // the call answered before the restart was not made again
    expect(await toolRows(second, "t1")).toEqual([{ tool_name: "refund", status: "succeeded", permission: "approve", decided_by: "ops" }]);
  });

  it("asks only when the needsApproval function says so, and a denial reaches the model as execution-denied", async () => {
    const cairn = env.cairn(await env.database(), { pollIntervalMs: 50 });
    const refunds: number[] = [];
    const tools = { refund: refundTool(refunds, ({ amountCents }) => amountCents > 10_000) };
    const small = toolThenAnswer("refund", { amountCents: 500 });
    const large = toolThenAnswer("refund", { amountCents: 50_000 });
    const smallAgent = cairn.agent("small", { model: small, tools });
    const largeAgent = cairn.agent("large", { model: large, tools });
    await cairn.launch();

    const quick = await smallAgent.start({ prompt: "Refund 5 dollars" }, { id: "small" });
    expect((await quick.result()).text).toBe('tool said {"type":"json","value":{"refunded":500}}');
    expect(await storeOf(cairn).select("SELECT * FROM cairn_approvals WHERE run_id = 'small'")).toEqual([]);

    const run = await largeAgent.start({ prompt: "Refund 500 dollars" }, { id: "large" });
    const request = await pending(cairn, "large");
    await cairn.approvals.deny("large", request.toolCallId, { by: "alice", reason: "over the limit" });
    const out = await run.result();
    expect(refunds).toEqual([500]);
    expect(toolOutputs(large.doGenerateCalls[1]!)).toEqual([{ type: "execution-denied", reason: "over the limit" }]);
    expect(out.text).toBe('tool said {"type":"execution-denied","reason":"over the limit"}');
    expect(out.toolResults).toEqual([
      { toolCallId: "call-refund", toolName: "refund", input: { amountCents: 50_000 }, output: { denied: true, reason: "over the limit" } },
    ]);
    expect(await toolRows(cairn, "large")).toEqual([{ tool_name: "refund", status: "denied", permission: "approve", decided_by: "alice" }]);
    const asked = await storeOf(cairn).select<{ name: string }>("SELECT name FROM cairn_steps WHERE run_id = 'large' AND name LIKE 'needs-approval:%'");
    expect(asked.map((r) => r.name)).toEqual(["needs-approval:refund"]); // the function ran once, recorded
  });

  it("asks once when both the approve permission and needsApproval guard a tool", async () => {
    const cairn = env.cairn(await env.database(), { pollIntervalMs: 50 });
    const refunds: number[] = [];
    const agent = cairn.agent("both", {
      model: toolThenAnswer("refund", { amountCents: 700 }),
      tools: { refund: refundTool(refunds, true) },
      permissions: { refund: "approve" },
    });
    await cairn.launch();
    const run = await agent.start({ prompt: "Refund 7 dollars" }, { id: "both" });
    const request = await pending(cairn, "both");
    await cairn.approvals.approve("both", request.toolCallId, { by: "ops" });
    await run.result();
    expect(refunds).toEqual([700]);
    const rows = await storeOf(cairn).select<{ status: string; decided_by: string }>(
      "SELECT status, decided_by FROM cairn_approvals WHERE run_id = 'both'",
    );
    expect(rows).toEqual([{ status: "approved", decided_by: "ops" }]);
  });

  it("makes needsApproval in ctx.tools a Cairn approval too; a denial without a reason is a bare execution-denied", async () => {
    const cairn = env.cairn(await env.database(), { pollIntervalMs: 50 });
    const refunds: number[] = [];
    const model = toolThenAnswer("refund", { amountCents: 900 });
    const wf = cairn.workflow("own-loop", async (ctx, prompt: string) => {
      const result = await generateText({
        model: ctx.model(model),
        prompt,
        tools: ctx.tools({ refund: refundTool(refunds, true) }),
        stopWhen: stepCountIs(3),
      });
      return result.text;
    });
    await cairn.launch();
    const run = await wf.start("Refund 9 dollars", { id: "own" });
    const request = await pending(cairn, "own");
    expect(request.toolName).toBe("refund");
    await cairn.approvals.deny("own", request.toolCallId);
    expect(await run.result()).toBe('tool said {"type":"execution-denied"}');
    expect(toolOutputs(model.doGenerateCalls[1]!)).toEqual([{ type: "execution-denied" }]);
    expect(refunds).toEqual([]);
  });

  it("denies through streamText too: the streamed loop shows the model execution-denied", async () => {
    const cairn = env.cairn(await env.database(), { pollIntervalMs: 50 });
    const refunds: number[] = [];
    const model = new MockLanguageModel({
      doStream: async (call) => {
        const outputs = toolOutputs(call);
        const parts: LanguageModelV3StreamPart[] =
          outputs.length === 0
            ? [{ type: "tool-call", toolCallId: "call-refund", toolName: "refund", input: '{"amountCents":300}' }]
            : [
                { type: "text-start", id: "t" },
                { type: "text-delta", id: "t", delta: `tool said ${JSON.stringify(outputs.at(-1))}` },
                { type: "text-end", id: "t" },
              ];
        const finish: LanguageModelV3StreamPart = {
          type: "finish",
          finishReason: { unified: outputs.length === 0 ? "tool-calls" : "stop", raw: undefined },
          usage: usage(),
        };
        return { stream: simulateReadableStream({ chunks: [{ type: "stream-start", warnings: [] }, ...parts, finish] }) };
      },
    });
    const wf = cairn.workflow("streamed", async (ctx) => {
      const result = streamText({
        model: ctx.model(model),
        prompt: "Refund 3 dollars",
        tools: ctx.tools({ refund: refundTool(refunds, true) }),
        stopWhen: stepCountIs(3),
      });
      return result.text;
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "streamed" });
    const request = await pending(cairn, "streamed");
    await cairn.approvals.deny("streamed", request.toolCallId, { reason: "not today" });
    expect(await run.result()).toBe('tool said {"type":"execution-denied","reason":"not today"}');
    expect(refunds).toEqual([]);
  });
});

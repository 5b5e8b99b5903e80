import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { jsonSchema, tool } from "ai";
import { afterEach, describe, expect, it } from "vitest";
import type { Cairn } from "../../src/index.js";
import { REFUND_SCRIPT, startMockLlm, type MockLlm } from "../../src/testing/mock-llm/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { cli, expectOk, expectOneLineError } from "./cli.js";
import { storeOf } from "../../src/internal.js";

const orderInput = jsonSchema<{ id: string | number }>({ type: "object", properties: { id: {} }, required: ["id"] });
const refundInput = jsonSchema<{ id: string | number; amountCents: number | string }>({
  type: "object",
  properties: { id: {}, amountCents: {} },
  required: ["id", "amountCents"],
});

/**
 * The CLI decides approvals as a client; the Cairn launched here, in the test process, executes
 * the agent and must pick the decision up. The agent runs as the child of a plain workflow, so
 * `cairn why` has an ancestor to walk up to.
 */
describe.each(BACKENDS)("cairn approvals/approve/deny/why on $name", (backend) => {
  const env = cairnFactory(backend);
  let llm: MockLlm | undefined;
  afterEach(async () => {
    await llm?.close();
    llm = undefined;
  });

  async function desk() {
    llm = await startMockLlm({ script: REFUND_SCRIPT });
    const db = await env.database();
    const cairn = env.cairn(db, { pollIntervalMs: 50 });
    const refunds: unknown[] = [];
    const provider = createOpenAICompatible({ name: "mock", baseURL: llm.url });
    const support = cairn.agent("support", {
      model: provider.chatModel("mock-1"),
      system: "You resolve refund requests.",
      tools: {
        lookUpOrder: tool({ inputSchema: orderInput, execute: async ({ id }) => ({ id, totalCents: 4200 }) }),
        refund: tool({ inputSchema: refundInput, execute: async ({ id }) => (refunds.push(id), { refunded: id }) }),
      },
      permissions: { refund: "approve" },
      pricing: { inputPerMillion: 0.15, outputPerMillion: 0.6 },
    });
    const deskWorkflow = cairn.workflow("desk", async (ctx, order: number) => {
      const child = await ctx.child(support, { prompt: `Refund order ${order}` }, { id: `ticket-${order}` });
      return (await child.result()).text;
    });
    await cairn.launch();
    return { db, cairn, llm, refunds, deskWorkflow };
  }

  async function pendingToolCallId(cairn: Cairn, runId: string): Promise<string> {
    const [pending] = await eventually(async () => {
      const list = await cairn.approvals.list({ runId });
      return list.length > 0 ? list : undefined;
    });
    return pending!.toolCallId;
  }

  async function refundSeq(cairn: Cairn, runId: string): Promise<number> {
    const rows = await storeOf(cairn).select<{ seq: unknown }>("SELECT seq FROM cairn_tool_calls WHERE run_id = $1 AND tool_name = 'refund'", [runId]);
    return Number(rows[0]!.seq);
  }

  // Twelve CLI processes, each a Node start: past a minute on a loaded machine.
  it("lists a pending approval, approves it from the CLI, and the run finishes", { timeout: 180_000 }, async () => {
    const { db, cairn, refunds, deskWorkflow } = await desk();
    const run = await deskWorkflow.start(42, { id: "desk-42" });
    const toolCallId = await pendingToolCallId(cairn, "ticket-42");

    const listed = await cli(["approvals", "--database", db]);
    expectOk(listed);
    const lines = listed.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^RUN\s+TOOL CALL\s+TOOL\s+INPUT\s+REQUESTED\s+WAITING$/);
    expect(lines[1]).toMatch(
      new RegExp(`^ticket-42\\s+${toolCallId}\\s+refund\\s+\\{"id":"?42"?,"amountCents":"?4200"?\\}\\s+\\d{4}-\\d\\d-\\d\\d \\S+\\s+\\S+$`),
    );
    expect(lines).toHaveLength(3);
    const json = JSON.parse((await cli(["approvals", "--run", "ticket-42", "--json", "--database", db])).stdout) as Record<string, unknown>[];
    expect(json).toEqual([expect.objectContaining({ runId: "ticket-42", toolCallId, toolName: "refund", waitingMs: expect.any(Number) })]);
    expect((await cli(["approvals", "--run", "desk-42", "--database", db])).stdout).toBe("no pending approvals for run desk-42\n");

    const approved = await cli(["approve", "ticket-42", toolCallId, "--by", "ops", "--database", db]);
    expectOk(approved);
    expect(approved.stdout).toBe(`approved tool call ${toolCallId} (refund) in run ticket-42, as ops\n`);
    expect(await run.result()).toMatch(/^Refunded order 42/);
    expect(refunds.map(String)).toEqual(["42"]);
    expect((await cli(["approvals", "--database", db])).stdout).toBe("no pending approvals\n");

    expectOneLineError(
      await cli(["approve", "ticket-42", toolCallId, "--database", db]),
      new RegExp(`tool call ${toolCallId} \\(refund\\) in run ticket-42 was already approved by ops at `),
    );
    expectOneLineError(await cli(["deny", "ticket-42", toolCallId, "--reason", "late", "--database", db]), /was already approved by ops/);
    expectOneLineError(await cli(["approve", "nope", toolCallId, "--database", db]), /no run with id "nope"/);
    expectOneLineError(await cli(["approve", "ticket-42", "call_x", "--database", db]), /run ticket-42 has no approval request for tool call call_x/);
    expectOneLineError(await cli(["approve", "ticket-42", "--database", db]), /missing <toolCallId>/);
    expectOneLineError(await cli(["approvals", "--run", "nope", "--database", db]), /no run with id "nope"/);

    const shown = await cli(["show", "desk-42", "--database", db]);
    expectOk(shown);
    expect(shown.stdout).toMatch(/\nagents\nRUN\s+WORKFLOW\s+STATUS\s+MODEL CALLS\s+TOKENS\s+COST\n/);
    expect(shown.stdout).toMatch(/\ndesk-42\s+desk\s+succeeded\s+0\s+0\s+\$0\n/);
    expect(shown.stdout).toMatch(/\n└─ ticket-42\s+support\s+succeeded\s+3\s+\d+\s+\$0\.0000\d\d\n/);
    expect(shown.stdout).toMatch(/\ntotal \(2 runs\)\s+3\s+\d+\s+\$0\.0000\d\d\n$/);
    const view = JSON.parse((await cli(["show", "ticket-42", "--json", "--database", db])).stdout) as { agents: Record<string, unknown>[] };
    expect(view.agents).toEqual([expect.objectContaining({ id: "ticket-42", depth: 0, modelCalls: 3, costUsd: expect.any(Number) })]);
  });

  it("denies with a reason from the CLI, and the model is told", async () => {
    const { db, cairn, llm, refunds, deskWorkflow } = await desk();
    const run = await deskWorkflow.start(7, { id: "desk-7" });
    const toolCallId = await pendingToolCallId(cairn, "ticket-7");

    const denied = await cli(["deny", "ticket-7", toolCallId, "--reason", "over the refund limit", "--database", db], { USER: "alice" });
    expectOk(denied);
    expect(denied.stdout).toBe(`denied tool call ${toolCallId} (refund) in run ticket-7, as alice: over the refund limit\n`);
    await run.result();
    expect(refunds).toEqual([]);
    const told = JSON.stringify(llm.requests().at(-1));
    // The model sees the AI SDK's execution-denied output, with the denier's reason.
    expect(told).toContain('"preview":"over the refund limit"');

    const why = await cli(["why", "ticket-7", String(await refundSeq(cairn, "ticket-7")), "--database", db]);
    expectOk(why);
    expect(why.stdout).toMatch(/status\s+denied, permission approve, decided by alice at /);
    expect(why.stdout).toMatch(/reason\s+over the refund limit/);
  });

  it("explains a tool call: tool ← model response ← prompt ← run ← parent run", async () => {
    const { db, cairn, deskWorkflow } = await desk();
    const run = await deskWorkflow.start(42, { id: "desk-42" });
    const toolCallId = await pendingToolCallId(cairn, "ticket-42");
    await cairn.approvals.approve("ticket-42", toolCallId, { by: "ops" });
    await run.result();
    const seq = await refundSeq(cairn, "ticket-42");

    const why = await cli(["why", "ticket-42", String(seq), "--database", db]);
    expectOk(why);
    const text = why.stdout;
    const order = [
      `why step ${seq} of run ticket-42`,
      `tool call     refund  seq ${seq}, ${toolCallId}`,
      "input      {",
      "status     succeeded, permission approve, decided by ops at ",
      "↑ requested by model call ",
      "model call    mock.chat mock-1  seq ",
      "response   [refund(",
      "finish     tool-calls",
      "usage      ",
      "↑ after reading",
      "prompt        4 messages, the last 3 shown (--json for all)",
      "user       Refund order 42",
      "assistant  lookUpOrder(",
      "tool       lookUpOrder → {",
      "↑ in",
      "run           ticket-42  support, succeeded",
      'input      {"prompt":"Refund order 42"}',
      "↑ started by step 0 (support, child) of",
      "run           desk-42  desk, succeeded",
      "input      42",
    ];
    let at = 0;
    for (const piece of order) {
      const found = text.indexOf(piece, at);
      expect(found, `"${piece}" after position ${at} in:\n${text}`).toBeGreaterThanOrEqual(0);
      at = found + piece.length;
    }

    const json = JSON.parse((await cli(["why", "ticket-42", String(seq), "--json", "--database", db])).stdout) as {
      chain: ({ kind: string } & Record<string, unknown>)[];
    };
    expect(json.chain.map((link) => link.kind)).toEqual(["tool", "model", "prompt", "run", "run"]);
    expect(json.chain[0]).toMatchObject({ toolName: "refund", toolCallId, status: "succeeded", permission: "approve", decidedBy: "ops" });
    expect(json.chain[1]).toMatchObject({ modelId: "mock-1", finishReason: "tool-calls", toolCallIds: [toolCallId] });
    expect((json.chain[2]!.messages as { role: string }[]).map((m) => m.role)).toEqual(["system", "user", "assistant", "tool"]);
    expect(json.chain[4]).toMatchObject({ runId: "desk-42", startedBy: null });
    expect(json.chain[3]).toMatchObject({ runId: "ticket-42", startedBy: { runId: "desk-42", seq: 0, name: "support", stepKind: "child" } });

    const model = JSON.parse((await cli(["why", "ticket-42", String(json.chain[1]!.seq), "--json", "--database", db])).stdout) as typeof json;
    expect(model.chain.map((link) => link.kind)).toEqual(["model", "prompt", "run", "run"]);
    const child = JSON.parse((await cli(["why", "desk-42", "0", "--json", "--database", db])).stdout) as typeof json;
    expect(child.chain).toEqual([
      expect.objectContaining({ kind: "step", name: "support", stepKind: "child", output: "ticket-42" }),
      expect.objectContaining({ kind: "run", runId: "desk-42" }),
    ]);

    expectOneLineError(await cli(["why", "nope", "1", "--database", db]), /no run with id "nope"/);
    expectOneLineError(await cli(["why", "ticket-42", "99", "--database", db]), /run ticket-42 has no step at seq 99 — its steps are seq 0 to \d+/);
    expectOneLineError(await cli(["why", "ticket-42", "x", "--database", db]), /<seq> must be an integer ≥ 0, not "x"/);
    expectOneLineError(await cli(["why", "ticket-42", "--database", db]), /missing <seq>/);
  });

  it("shows no agents section for a run without children or model calls", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const plain = cairn.workflow("plain", async (ctx) => ctx.step("one", () => 1));
    await cairn.launch();
    await (await plain.start(undefined, { id: "p" })).result();
    const shown = await cli(["show", "p", "--database", db]);
    expectOk(shown);
    expect(shown.stdout).not.toContain("agents");
    expect(JSON.parse((await cli(["show", "p", "--json", "--database", db])).stdout)).not.toHaveProperty("agents");
    expect((await cli(["approvals", "--database", db])).stdout).toBe("no pending approvals\n");
  });
});

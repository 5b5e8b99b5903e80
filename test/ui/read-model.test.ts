import { describe, expect, it } from "vitest";
import { InvalidSpecError, TerminalError } from "../../src/errors.js";
import { storeOf } from "../../src/internal.js";
import { loadCostReport } from "../../src/observe/costs.js";
import { loadModelCall } from "../../src/observe/model-call.js";
import { NoSuchStepError } from "../../src/observe/provenance.js";
import { listOperatorActions, listPendingApprovals, loadRunDetails } from "../../src/observe/run-details.js";
import { listAgentNames, listRunPage, listWorkflowNames } from "../../src/observe/run-page.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { supportDesk } from "./fixture.js";

/**
 * The dashboard's reads (src/observe/) and actions (its API) on each backend, without a browser:
 * the same agent run as the browser test, read and steered through the HTTP API with the token.
 */
describe.each(BACKENDS)("the dashboard's reads and actions on $name", (backend) => {
  const env = cairnFactory(backend);

  it("reads model calls with their prompt delta, costs, run details, and pages runs by keyset", async () => {
    const db = await env.database();
    const cairn = env.cairn(db, { pollIntervalMs: 50 });
    const { llm, desk } = await supportDesk(cairn);
    const breaks = cairn.workflow("breaks", async (ctx) => {
      await ctx.step("fine", async () => 1);
      await ctx.step("boom", async () => {
        throw new TerminalError("the ledger is closed");
      });
    });
    await cairn.launch();
    const server = await cairn.ui({ port: 0, actor: "ops" });
    try {
      const { origin, searchParams } = new URL(server.url);
      const headers = { authorization: `Bearer ${searchParams.get("token")}`, "content-type": "application/json" };
      const act = async (body: Record<string, unknown>) => {
        const response = await fetch(`${origin}/api/actions`, { method: "POST", headers, body: JSON.stringify(body) });
        return { status: response.status, body: (await response.json()) as Record<string, unknown> };
      };
      const run = await desk.start(7, { id: "desk-7" });
      await eventually(async () => (await cairn.approvals.list({ runId: "ticket-7" })).length > 0);
      const store = storeOf(cairn);
      const [pending] = await listPendingApprovals(store);
      expect(pending).toMatchObject({ runId: "ticket-7", toolName: "refund", workflow: "support", input: { id: 7, amountCents: 4200 } });

      // Deny with a reason, through the API: recorded with the page's actor, the approval with decided_by.
      const denied = await act({ action: "deny", runId: "ticket-7", toolCallId: pending!.toolCallId, reason: "over the limit", actor: "carol" });
      expect(denied).toEqual({ status: 200, body: expect.objectContaining({ decision: "denied", actor: "carol", reason: "over the limit" }) });
      // The same rules as the CLI: a decision is final.
      const again = await act({ action: "approve", runId: "ticket-7", toolCallId: pending!.toolCallId });
      expect(again.status).toBe(400);
      expect(String(again.body.error)).toMatch(/already decided \(denied by carol\)/);
      await run.result();
      expect(await listOperatorActions(store, "ticket-7")).toEqual([expect.objectContaining({ action: "deny", actor: "carol" })]);

      // The model calls: the second sees the first's prompt and more (the delta), and links both ways.
      const calls = await store.select<{ seq: unknown }>("SELECT seq FROM cairn_model_calls WHERE run_id = 'ticket-7' ORDER BY seq");
      expect(calls.length).toBeGreaterThanOrEqual(2);
      const [first, second] = [Number(calls[0]!.seq), Number(calls[1]!.seq)];
      const call = await loadModelCall(store, "ticket-7", second);
      expect(call).toMatchObject({ previousSeq: first, modelId: "mock-1", finishReason: "tool-calls" });
      expect(call.sharedWithPrevious).toBeGreaterThan(0);
      expect(call.messages.length).toBeGreaterThan(call.sharedWithPrevious);
      expect(call.messages.slice(call.sharedWithPrevious).map((m) => m.role)).toContain("tool");
      expect(call.toolCalls).toEqual([expect.objectContaining({ toolName: "refund", status: "denied", decidedBy: "carol" })]);
      expect(call.usage.totalTokens).toBe(call.usage.inputTokens + call.usage.outputTokens);
      expect(call.costUsd).toBeGreaterThan(0);
      expect((await loadModelCall(store, "ticket-7", first)).sharedWithPrevious).toBe(0);
      await expect(loadModelCall(store, "ticket-7", 999)).rejects.toBeInstanceOf(NoSuchStepError);

      const costs = await loadCostReport(store);
      expect(costs.byAgent.map((b) => b.key)).toEqual(["support"]);
      expect(costs.byModel).toEqual([expect.objectContaining({ key: "mock-1", modelCalls: calls.length })]);
      expect(costs.byDay).toEqual([expect.objectContaining({ key: new Date().toISOString().slice(0, 10) })]);
      const details = await loadRunDetails(store, "ticket-7");
      expect(details.approvals).toEqual([expect.objectContaining({ status: "denied", decidedBy: "carol", reason: "over the limit" })]);
      expect(details.toolCalls.map((t) => t.toolName)).toEqual(["lookUpOrder", "refund"]);

      // A failed step's error comes with its stack and class; a run's error too.
      const broken = await breaks.start(undefined, { id: "broken-1" });
      await expect(broken.result()).rejects.toThrow(/the ledger is closed/);
      const view = (await (await fetch(`${origin}/api/runs/broken-1`, { headers })).json()) as {
        status: string;
        error: { name: string; message: string; stack?: string };
        journal: { name: string; status: string; attempts: number; error: { name: string; code?: string; stack?: string } | null }[];
      };
      expect(view.status).toBe("failed");
      const boom = view.journal.find((s) => s.name === "boom")!;
      expect(boom).toMatchObject({ status: "failed", attempts: 1, error: { name: "TerminalError", code: "TERMINAL" } });
      expect(boom.error!.stack).toMatch(/the ledger is closed\n\s+at /);
      expect(view.error.message).toMatch(/the ledger is closed/);

      // The run list: filters, the agent filter, keyset pages that neither skip nor repeat.
      expect(await listWorkflowNames(store)).toEqual(["breaks", "desk", "support"]);
      expect(await listAgentNames(store)).toEqual(["support"]);
      const agentRuns = (await listRunPage(store, { agent: "*" })).runs;
      expect(agentRuns.map((r) => r.id)).toEqual(["ticket-7"]);
      expect((await listRunPage(store, { agent: "support", status: "succeeded" })).runs.map((r) => r.id)).toEqual(["ticket-7"]);
      const all: string[] = [];
      let after: string | undefined;
      do {
        const page = await listRunPage(store, { limit: 1, ...(after === undefined ? {} : { after }) });
        all.push(...page.runs.map((r) => r.id));
        after = page.next ?? undefined;
      } while (after !== undefined);
      expect(all).toEqual((await listRunPage(store, { limit: 100 })).runs.map((r) => r.id));
      expect(new Set(all).size).toBe(all.length);
      expect((await listRunPage(store, { idPrefix: "ticket-" })).runs.map((r) => r.id)).toEqual(["ticket-7"]);
      expect((await listRunPage(store, { idPrefix: "ticket_" })).runs).toEqual([]); // _ is not a wildcard
      await expect(listRunPage(store, { limit: 0 })).rejects.toBeInstanceOf(InvalidSpecError);
      await expect(listRunPage(store, { after: "yesterday" })).rejects.toBeInstanceOf(InvalidSpecError);
      await expect(listRunPage(store, { status: "lost" as never })).rejects.toBeInstanceOf(InvalidSpecError);
      // Fork from a step, through the API: a new run, recorded with who forked it.
      const forked = await act({ action: "fork", runId: "desk-7", fromSeq: 0 });
      expect(forked.status).toBe(200);
      expect((await store.getRun(String(forked.body.forked)))?.forkedFrom).toBe("desk-7");
      expect((await act({ action: "fork", runId: "desk-7", fromSeq: -1 })).status).toBe(400);
      expect((await act({ action: "resume", runId: "desk-7" })).body).toMatchObject({ resumed: false, actor: "ops" });
      expect((await act({ action: "explode", runId: "desk-7" })).status).toBe(400);
      expect((await fetch(`${origin}/api/runs/nope`, { headers })).status).toBe(404);
      for (const bad of ["/runs/desk-7?from=-1", "/runs/desk-7/models/x", "/runs/desk-7/why/1.5", "/costs?since=soon"]) {
        expect((await fetch(`${origin}/api${bad}`, { headers })).status, bad).toBe(400);
      }

      const badFilter = await fetch(`${origin}/api/runs?limit=9999`, { headers });
      expect(badFilter.status).toBe(400);
      expect(((await badFilter.json()) as { error: string }).error).toMatch(/limit/);
    } finally {
      await server.close();
      await llm.close();
    }
  });
});

import { Hono, type Context } from "hono";
import { CairnError, InvalidSpecError, RunNotFoundError } from "../errors.js";
import { loadAgentTree, loadRunTree } from "../observe/agent-tree.js";
import { loadCostReport } from "../observe/costs.js";
import { loadRunView, runViewJson } from "../observe/journal.js";
import { loadModelCall } from "../observe/model-call.js";
import { loadProvenance, NoSuchStepError } from "../observe/provenance.js";
import { errorDetail, listOperatorActions, listPendingApprovals, loadRunDetails } from "../observe/run-details.js";
import { listAgentNames, listRunPage, listWorkflowNames } from "../observe/run-page.js";
import { listQueueNames, loadRunQueue } from "../observe/run-queue.js";
import { findRun } from "../observe/runs.js";
import { operatorQuery } from "../observe/sql.js";
import type { RunStatus } from "../store/store.js";
import { performAction, type ActionName } from "./actions.js";
import type { UiHost } from "./host.js";
import { SQL_EXAMPLES } from "./sql-examples.js";

/** The dashboard's JSON API under /api: reads through src/observe/, actions through the host. */
export function apiRoutes(host: UiHost, defaultActor: string): Hono {
  const api = new Hono();

  api.get("/runs", async (c) => {
    const started = performance.now();
    const q = c.req.query();
    const page = await listRunPage(await host.store(), {
      status: (q.status || undefined) as RunStatus | undefined,
      workflow: q.workflow || undefined,
      agent: q.agent || undefined,
      queue: q.queue || undefined,
      idPrefix: q.q || undefined,
      after: q.after || undefined,
      limit: q.limit === undefined ? undefined : Number(q.limit),
    });
    c.header("Server-Timing", `db;dur=${(performance.now() - started).toFixed(1)}`);
    return c.json(page);
  });

  api.get("/filters", async (c) => {
    const store = await host.store();
    const [workflows, agents, queues] = await Promise.all([listWorkflowNames(store), listAgentNames(store), listQueueNames(store)]);
    return c.json({ workflows, agents, queues, statuses: ["enqueued", "running", "waiting", "succeeded", "failed", "cancelled"] });
  });

  api.get("/runs/:id", async (c) => {
    const store = await host.store();
    const runId = c.req.param("id");
    const from = c.req.query("from");
    const view = await loadRunView(store, runId, from === undefined ? {} : { from: wholeNumber("from", from) });
    const [details, actions, queue] = await Promise.all([loadRunDetails(store, runId), listOperatorActions(store, runId), loadRunQueue(store, runId)]);
    const json = runViewJson(view);
    // The timeline's rows, with each error in full (its stack) and each tool step's input.
    const tools = new Map(details.toolCalls.map((t) => [t.seq, t]));
    const journal = (json.journal as Record<string, unknown>[]).map((step, i) => {
      const row = view.journal[i]!;
      return {
        ...step,
        startedAtMs: row.startedAt,
        finishedAtMs: row.finishedAt,
        error: row.error === null ? null : errorDetail(row.error),
        input: tools.get(row.seq)?.input ?? null,
        toolCallId: tools.get(row.seq)?.toolCallId ?? null,
      };
    });
    return c.json({
      ...json,
      createdAtMs: view.run.createdAt,
      finishedAtMs: view.run.finishedAt,
      error: view.run.error === null ? null : errorDetail(view.run.error),
      journal,
      ...details,
      actions,
      queue,
    });
  });

  api.get("/runs/:id/models/:seq", async (c) => c.json(await loadModelCall(await host.store(), c.req.param("id"), seqParam(c))));

  api.get("/runs/:id/why/:seq", async (c) => {
    const runId = c.req.param("id");
    const seq = seqParam(c);
    return c.json({ runId, seq, chain: await loadProvenance(await host.store(), runId, seq) });
  });

  api.get("/runs/:id/tree", async (c) => {
    const store = await host.store();
    const run = await findRun(store, c.req.param("id"));
    if (run === undefined) throw new RunNotFoundError(c.req.param("id"));
    // Supervision (`cairn tree`: each child's state, restarts, last exit, replacement) and
    // delegation in one tree; the agents' tokens beside it where there are model calls.
    const [nodes, agents] = await Promise.all([loadRunTree(store, run), loadAgentTree(store, run)]);
    const tokens = new Map((agents ?? []).map((a) => [a.id, a.totalTokens]));
    const parentSeq = new Map((agents ?? []).map((a) => [a.id, a.parentSeq]));
    return c.json({
      runId: run.id,
      rootId: run.rootId,
      tree: nodes.map((n) => ({ ...n, status: n.state, parentSeq: parentSeq.get(n.id) ?? null, totalTokens: tokens.get(n.id) ?? 0 })),
    });
  });

  api.get("/approvals", async (c) => c.json({ pending: await listPendingApprovals(await host.store()) }));

  api.get("/costs", async (c) => {
    const since = c.req.query("since");
    return c.json(await loadCostReport(await host.store(), since === undefined ? 0 : wholeNumber("since", since)));
  });

  api.get("/sql/examples", (c) => c.json({ examples: SQL_EXAMPLES }));

  api.post("/sql", async (c) => {
    const body = await jsonBody(c);
    if (typeof body.sql !== "string" || body.sql.trim() === "") throw new InvalidSpecError("sql", body.sql, "give one SELECT statement");
    const started = performance.now();
    const result = await operatorQuery(await host.store(), body.sql, { timeoutMs: 5000 });
    return c.json({ ...result, ms: Math.round(performance.now() - started) });
  });

  api.post("/actions", async (c) => {
    const body = await jsonBody(c);
    const actor = typeof body.actor === "string" && body.actor.trim() !== "" ? body.actor.trim() : defaultActor;
    if (typeof body.runId !== "string" || body.runId === "") throw new InvalidSpecError("runId", body.runId, "name the run to act on");
    return c.json(
      await performAction(host, {
        action: body.action as ActionName,
        runId: body.runId,
        actor,
        ...(typeof body.fromSeq === "number" ? { fromSeq: body.fromSeq } : {}),
        ...(typeof body.toolCallId === "string" ? { toolCallId: body.toolCallId } : {}),
        ...(typeof body.reason === "string" && body.reason !== "" ? { reason: body.reason } : {}),
      }),
    );
  });

  api.get("/me", (c) => c.json({ actor: defaultActor }));

  api.onError((error, c) => {
    const status = error instanceof RunNotFoundError || error instanceof NoSuchStepError ? 404 : error instanceof CairnError ? 400 : 500;
    const name = error instanceof Error ? error.name : "Error";
    return c.json({ error: error instanceof Error ? error.message : String(error), name }, status);
  });
  return api;
}

function seqParam(c: Context): number {
  return wholeNumber("seq", c.req.param("seq") ?? "");
}

/** A query or path parameter that must be a whole number ≥ 0 (a seq, a time in ms). */
function wholeNumber(field: string, text: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(value)) throw new InvalidSpecError(field, text, "give a whole number ≥ 0");
  return value;
}

async function jsonBody(c: Context): Promise<Record<string, unknown>> {
  try {
    const body = (await c.req.json()) as unknown;
    if (body !== null && typeof body === "object" && !Array.isArray(body)) return body as Record<string, unknown>;
  } catch {
    // Reported below.
  }
  throw new InvalidSpecError("body", "(not a JSON object)", "send a JSON object with Content-Type: application/json");
}

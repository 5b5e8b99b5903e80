import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import Database from "better-sqlite3";
import { jsonSchema, tool } from "ai";
import pg from "pg";
import { chromium, type Browser } from "playwright-core";
import type { Cairn } from "../../src/index.js";
import { REFUND_SCRIPT, startMockLlm, type MockLlm } from "../../src/testing/mock-llm/index.js";

/** Debian's Chromium, headless, with nothing that reaches the network on its own. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

const orderInput = jsonSchema<{ id: string | number }>({ type: "object", properties: { id: {} }, required: ["id"] });
const refundInput = jsonSchema<{ id: string | number; amountCents: number | string }>({
  type: "object",
  properties: { id: {}, amountCents: {} },
  required: ["id", "amountCents"],
});

/**
 * The demo's support desk on a real Cairn and the mock LLM: a plain `desk` workflow starts the
 * `support` agent as its child, which looks the order up and asks a human before `refund` runs.
 */
export async function supportDesk(cairn: Cairn): Promise<{ llm: MockLlm; refunds: unknown[]; desk: ReturnType<Cairn["workflow"]> }> {
  const llm = await startMockLlm({ script: REFUND_SCRIPT });
  const refunds: unknown[] = [];
  const provider = createOpenAICompatible({ name: "mock", baseURL: llm.url });
  const support = cairn.agent("support", {
    model: provider.chatModel("mock-1"),
    system: "You resolve refund requests.",
    tools: {
      lookUpOrder: tool({ inputSchema: orderInput, execute: async ({ id }) => ({ id, totalCents: 4200 }) }),
      refund: tool({ inputSchema: refundInput, execute: async ({ id }) => (refunds.push(id), { refunded: id, status: "refunded" }) }),
    },
    permissions: { refund: "approve" },
    pricing: { inputPerMillion: 3, outputPerMillion: 15 },
  });
  const desk = cairn.workflow("desk", async (ctx, order: number) => {
    const child = await ctx.child(support, { prompt: `Refund order ${order}` }, { id: `ticket-${order}` });
    return (await child.result()).text;
  });
  return { llm, refunds, desk: desk as unknown as ReturnType<Cairn["workflow"]> };
}

export const BULK_WORKFLOWS = ["bulk-import", "bulk-export", "bulk-sync"];
export const BULK_STATUSES = ["succeeded", "failed", "cancelled", "enqueued", "waiting", "succeeded"];

/**
 * `count` finished and unfinished runs in one INSERT ... SELECT over a generated series, the same
 * statement on both backends but for the series: run i has workflow BULK_WORKFLOWS[i % 3], status
 * BULK_STATUSES[i % 6] and was created i ms after `base`. Written with the database's own driver,
 * which takes a second where 100,000 starts would take minutes.
 */
export async function insertRuns(database: string, count: number, base: number): Promise<void> {
  const select = (series: string) => `
    INSERT INTO cairn_runs (id, workflow, status, input, root_id, app_version, created_at, updated_at, finished_at, recoveries)
    SELECT 'bulk-' || i, CASE i % 3 WHEN 0 THEN 'bulk-import' WHEN 1 THEN 'bulk-export' ELSE 'bulk-sync' END,
           CASE i % 6 WHEN 0 THEN 'succeeded' WHEN 1 THEN 'failed' WHEN 2 THEN 'cancelled' WHEN 3 THEN 'enqueued' WHEN 4 THEN 'waiting' ELSE 'succeeded' END,
           '{"n":' || i || '}', 'bulk-' || i, 'bulk', ${base} + i, ${base} + i,
           CASE WHEN i % 6 IN (0, 1, 2, 5) THEN ${base} + i + 5 ELSE NULL END, 0
    FROM ${series}`;
  await insertOverSeries(database, count, select, "cairn_runs");
}

/**
 * Runs `select(series)` — an INSERT ... SELECT over i = 0 .. count − 1 — with the database's own
 * driver, then ANALYZE (`table` on PostgreSQL), as a live database would have been.
 */
async function insertOverSeries(database: string, count: number, select: (series: string) => string, table: string): Promise<void> {
  if (/^postgres/.test(database)) {
    const client = new pg.Client({ connectionString: database });
    await client.connect();
    try {
      await client.query(select(`generate_series(0, ${count - 1}) AS s(i)`));
      await client.query(`ANALYZE ${table}`);
    } finally {
      await client.end();
    }
  } else {
    const db = new Database(database);
    try {
      db.exec(`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < ${count - 1}) ${select("s")}`);
      db.exec("ANALYZE");
    } finally {
      db.close();
    }
  }
}

/**
 * A queue and a supervisor for the dashboard's tests: `send` runs enqueued on `emails` (declared
 * with priorities), and `team`, a supervisor whose `worker` child crashes on its first run (a
 * TypeError) and, restarted as `<team>/worker~1`, waits for a message.
 */
export function queuesAndSupervisor(cairn: Cairn): { send: ReturnType<Cairn["workflow"]>; team: ReturnType<Cairn["supervisor"]> } {
  cairn.queue("emails", { concurrency: 1, priority: true });
  const send = cairn.workflow("send", async (ctx, to: string) => ctx.step("send", async () => `sent to ${to}`));
  const flaky = cairn.workflow("flaky", async (ctx) => {
    if (!ctx.runId.includes("~")) throw new TypeError("tool timed out");
    await ctx.recv("finish");
  });
  const team = cairn.supervisor("team", { intensity: 3, children: [{ id: "worker", workflow: flaky }] });
  return { send: send as unknown as ReturnType<Cairn["workflow"]>, team };
}

/**
 * Queue rows (`cairn_queue_runs`) for the runs `insertRuns` made: every 10th run on `bulk-q`, every
 * 1,000th on `rare`, all dispatched (so no executor would take them). Then ANALYZE, as a live
 * database would have been.
 */
export async function insertQueueRuns(database: string, count: number, base: number): Promise<void> {
  const select = (series: string) => `
    INSERT INTO cairn_queue_runs (run_id, queue, priority, enqueued_at, dispatched_at, executor_id, policy)
    SELECT 'bulk-' || i, CASE WHEN i % 1000 = 0 THEN 'rare' ELSE 'bulk-q' END, 0, ${base} + i, ${base} + i + 1, 'bulk-executor', 'fifo'
    FROM ${series} WHERE i % 10 = 0`;
  await insertOverSeries(database, count, select, "cairn_queue_runs");
}

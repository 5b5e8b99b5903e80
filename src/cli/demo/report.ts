import { relative } from "node:path";
import { num } from "../../observe/agent-tables.js";
import { formatUsd } from "../agent-fields.js";
import { displayName } from "../database.js";
import { print, renderCell, table } from "../output.js";
import { bold, dim, green, red } from "../style.js";
import { euros } from "./narrator.js";
import type { Kill } from "./demo-workers.js";
import type { DemoRun } from "./run-demo.js";
import { storeOf } from "../../internal.js";

export interface TicketOutcome {
  runId: string;
  orderId: string;
  status: string;
  /** Times the refund tool reached the payment service. */
  refundToolRuns: number;
  /** Refunds the payment service made (requests it did not deduplicate). */
  refunds: number;
  refundedCents: number;
  idempotencyKeys: string[];
}

export interface DemoVerdict {
  ok: boolean;
  completed: number;
  tickets: TicketOutcome[];
  modelCalls: {
    /** Requests the model received. */
    made: number;
    /** Calls recorded in cairn_model_calls: what the runs needed, each made once. */
    needed: number;
    /** Requests lost in flight at the kills (made, never recorded): the only ones allowed twice. */
    lostAtKills: number;
    /** Requests that failed at the provider, each retried. */
    failed: number;
  };
  refundToolRuns: number;
  refunds: number;
  duplicateRefunds: number;
  cost: { usd: number; inputTokens: number; outputTokens: number; totalTokens: number };
  /** What went wrong, when not ok. */
  problems: string[];
}

/**
 * Counts from the database and from the payment service's ledger. Every ticket's run succeeded;
 * every order was refunded once, however often the refund tool ran (a tool killed after its side
 * effect and before its checkpoint runs again — at-least-once, as steps are — and the service
 * deduplicates by the tool call's idempotency key); and the model was asked for each recorded call
 * once, except calls in flight at a kill, whose responses were never recorded.
 */
export async function judge(demo: DemoRun): Promise<DemoVerdict> {
  const store = storeOf(demo.cairn);
  const ids = demo.tickets.map((t) => t.runId);
  const params = ids.map((_, i) => `$${i + 1}`).join(", ");
  const runs = await store.select<{ id: string; status: string }>(`SELECT id, status FROM cairn_runs WHERE id IN (${params})`, ids);
  const [calls] = await store.select<{ n: unknown }>(`SELECT count(*) AS n FROM cairn_model_calls WHERE run_id IN (${params})`, ids);
  const [costs] = await store.select<Record<string, unknown>>(
    `SELECT sum(cost_usd) AS usd, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(total_tokens) AS total_tokens
     FROM cairn_costs WHERE run_id IN (${params})`,
    ids,
  );
  const ledger = demo.payments.entries();
  const tickets = demo.tickets.map((ticket): TicketOutcome => {
    const entries = ledger.filter((e) => e.idempotencyKey.startsWith(`${ticket.runId}:`));
    const refunds = entries.filter((e) => !e.deduplicated);
    return {
      runId: ticket.runId,
      orderId: ticket.orderId,
      status: runs.find((r) => r.id === ticket.runId)?.status ?? "missing",
      refundToolRuns: entries.length,
      refunds: refunds.length,
      refundedCents: refunds.reduce((sum, e) => sum + e.amountCents, 0),
      idempotencyKeys: [...new Set(entries.map((e) => e.idempotencyKey))],
    };
  });
  const refundsByOrder = new Map<string, number>();
  for (const entry of ledger) if (!entry.deduplicated) refundsByOrder.set(entry.orderId, (refundsByOrder.get(entry.orderId) ?? 0) + 1);
  const duplicateRefunds = [...refundsByOrder.values()].reduce((sum, n) => sum + Math.max(0, n - 1), 0);
  const modelCalls = {
    made: demo.modelRequests,
    needed: num(calls?.n),
    lostAtKills: demo.kills.reduce((sum, k) => sum + k.modelCallsLost, 0),
    failed: demo.modelRequestsFailed,
  };
  const cost = {
    usd: num(costs?.usd),
    inputTokens: num(costs?.input_tokens),
    outputTokens: num(costs?.output_tokens),
    totalTokens: num(costs?.total_tokens),
  };
  const completed = tickets.filter((t) => t.status === "succeeded").length;

  const problems: string[] = [];
  if (completed !== tickets.length) problems.push(`${tickets.length - completed} of ${tickets.length} runs did not succeed`);
  if (duplicateRefunds > 0) problems.push(`${duplicateRefunds} duplicate refund${duplicateRefunds === 1 ? "" : "s"}`);
  if (modelCalls.made < modelCalls.needed) problems.push(`the model received ${modelCalls.made} requests for ${modelCalls.needed} recorded calls`);
  const repeated = modelCalls.made - modelCalls.needed - modelCalls.lostAtKills - modelCalls.failed;
  if (repeated > 0) problems.push(`${repeated} recorded model call${repeated === 1 ? " was" : "s were"} made again`);
  if (cost.usd <= 0) problems.push("the runs cost nothing: no priced model call was recorded");
  if (demo.model.mock) {
    // The scripted model refunds every ticket, so each order is refunded once and both kills land.
    for (const t of tickets) if (t.refunds !== 1) problems.push(`order ${t.orderId} was refunded ${t.refunds} times, not once`);
    if (demo.kills.length !== 2) problems.push(`the worker was killed ${demo.kills.length} times, not twice`);
  }
  const refundToolRuns = tickets.reduce((sum, t) => sum + t.refundToolRuns, 0);
  const refunds = tickets.reduce((sum, t) => sum + t.refunds, 0);
  return { ok: problems.length === 0, completed, tickets, modelCalls, refundToolRuns, refunds, duplicateRefunds, cost, problems };
}

export async function printReport(demo: DemoRun, verdict: DemoVerdict): Promise<void> {
  const { modelCalls: calls, cost } = verdict;
  const field = (label: string, text: string) => print(`  ${dim(label.padEnd(16))}${text}`);
  print();
  print(bold("What happened, counted from the database and from the payment service's ledger"));
  field(
    "completed runs",
    `${verdict.completed}/${verdict.tickets.length}` +
      (verdict.completed === verdict.tickets.length
        ? green(" ✔")
        : red(
            ` (${verdict.tickets
              .filter((t) => t.status !== "succeeded")
              .map((t) => `${t.runId} ${t.status}`)
              .join(", ")})`,
          )),
  );
  field("model calls", `made ${calls.made}, needed ${calls.needed} — ${modelCallsText(calls, demo.kills)}`);
  field(
    "",
    dim(`made: requests ${demo.model.mock ? "the mock LLM received" : "the workers sent to the model"}; needed: calls recorded in cairn_model_calls`),
  );
  const rerun = verdict.refundToolRuns - verdict.refunds;
  field(
    "refunds",
    `${verdict.refunds}, ${verdict.duplicateRefunds === 0 ? green("0 duplicate refunds") : red(`${verdict.duplicateRefunds} duplicate refunds`)}` +
      (rerun === 0 ? "" : `: the refund tool ran ${verdict.refundToolRuns} times, and the payment service deduplicated ${rerun} by idempotency key`),
  );
  field(
    "cost",
    `${formatUsd(cost.usd)} for ${cost.totalTokens.toLocaleString("en-US")} tokens ` +
      `(${cost.inputTokens.toLocaleString("en-US")} in, ${cost.outputTokens.toLocaleString("en-US")} out), from cairn_costs`,
  );
  print();
  print(
    indent(
      table(
        ["TICKET", "ORDER", { header: "REFUND TOOL RAN", align: "right" }, { header: "REFUNDED", align: "right" }, "IDEMPOTENCY KEY", ""],
        verdict.tickets.map((t) => [
          t.runId,
          t.orderId,
          `${t.refundToolRuns}×`,
          `${t.refunds}× ${t.refunds === 0 ? "" : euros(t.refundedCents)}`.trim(),
          t.idempotencyKeys.join(", ") || "-",
          dim(
            t.refundToolRuns > t.refunds && t.refunds === 1
              ? "ran again after a kill; the service returned the first refund"
              : t.refundToolRuns === 1
                ? "ran once"
                : "",
          ),
        ]),
      ),
    ),
  );
  print(
    verdict.ok
      ? green(`✔ ${demo.kills.length} SIGKILLs; every ticket resolved, every order refunded once, no recorded model call made twice`)
      : red(`✖ ${verdict.problems.join("; ")}`),
  );

  const store = storeOf(demo.cairn);
  const shown = demo.kills.find((k) => k.after === "refund")?.runId ?? demo.tickets[0]!.runId;
  const cli = `node ${relative(process.cwd(), process.argv[1] ?? "dist/cli/main.js") || "dist/cli/main.js"}`;
  const db = `--database ${displayName(demo.database)}`;
  const query = async (title: string, sql: string) => {
    const result = await store.query(sql);
    print();
    print(`${bold(title)} ${dim(`${cli} sql "${sql}" ${db}`)}`);
    print(
      indent(
        table(
          result.columns,
          result.rows.map((row) => result.columns.map((c) => renderCell(row[c], 70))),
        ),
      ),
    );
    return result.rows;
  };
  await query(
    `The trajectory of ${shown}:`,
    `SELECT seq, kind, name, detail, tokens, cost_usd FROM cairn_trajectory WHERE run_id = '${shown}' ORDER BY seq`,
  );
  const provenance = await query(
    "Which model response caused this refund?",
    "SELECT tool_seq, tool_name, tool_call_id, model_seq, model_id, model_excerpt, decided_by FROM cairn_provenance " +
      `WHERE run_id = '${shown}' AND tool_name = 'refund'`,
  );
  const refundSeq = provenance[0]?.tool_seq;
  print();
  print(
    dim(
      `Explore: ${cli} show ${shown} ${db}` +
        (refundSeq === undefined || refundSeq === null ? "" : `\n         ${cli} why ${shown} ${String(refundSeq)} ${db}`) +
        `\n         ${cli} runs ${db}` +
        `\n         ${cli} ui ${db}   # the dashboard, in a browser`,
    ),
  );
}

function modelCallsText(calls: DemoVerdict["modelCalls"], kills: readonly Kill[]): string {
  const extra = calls.made - calls.needed;
  if (extra === 0) return `${green("none made twice")}: each call recorded before a kill was replayed from the journal, not asked again`;
  if (extra < 0) return red("fewer requests than recorded calls: the count is wrong");
  const parts: string[] = [];
  let left = extra;
  const failed = Math.min(left, calls.failed);
  if (failed > 0) parts.push(`${failed} failed at the provider and ${failed === 1 ? "was" : "were"} retried`);
  left -= failed;
  const lost = Math.min(left, calls.lostAtKills);
  if (lost > 0) {
    const where = kills.filter((k) => k.modelCallsLost > 0).map((k) => `${k.modelCallsLost} when worker #${k.worker} was killed`);
    parts.push(
      `${lost} made twice because ${lost === 1 ? "it was" : "they were"} in flight at a kill (${where.join(", ")}): ` +
        "the model had been asked, but its response was never recorded, so the recovered run asked again",
    );
  }
  left -= lost;
  if (left > 0) parts.push(red(`${left} recorded call${left === 1 ? " was" : "s were"} made again`));
  return parts.join("; ");
}

function indent(text: string): string {
  return text
    .split("\n")
    .map((line) => `  ${line}`)
    .join("\n");
}

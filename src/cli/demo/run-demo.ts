import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Cairn } from "../../index.js";
import { REFUND_SCRIPT, startMockLlm, type MockLlm } from "../../testing/mock-llm/index.js";
import { CliError } from "../cli-error.js";
import { displayName, isPostgres } from "../database.js";
import { print } from "../output.js";
import { bold, dim, green, red } from "../style.js";
import { APPROVAL_DELAY_MS, APPROVER, Approver } from "./approver.js";
import { configuredProvider, describeModel, languageModel, MOCK_LATENCY_MS, MOCK_MODEL_ID, modelEnv, type ModelConfig } from "./demo-model.js";
import { DemoWorkers, type Kill } from "./demo-workers.js";
import { JournalWatch } from "./journal-watch.js";
import { Narrator } from "./narrator.js";
import { PaymentService } from "./payment-service.js";
import { DEMO_APP_VERSION, DEMO_PRICING, registerSupportAgent, TICKETS, type Ticket } from "./support-agent.js";
import { storeOf } from "../../internal.js";

export interface DemoOptions {
  /** Default: a fresh SQLite file in a new temporary directory. */
  database?: string;
  /** Print nothing as it happens (the caller prints a JSON summary). */
  quiet: boolean;
}

export interface TicketRun extends Ticket {
  runId: string;
}

export interface DemoRun {
  tickets: TicketRun[];
  model: ModelConfig;
  database: string;
  directory: string;
  payments: PaymentService;
  kills: Kill[];
  /** Requests the model received: the mock LLM's request log, or what the workers reported sending. */
  modelRequests: number;
  /** Of those, the ones that failed (and were retried). */
  modelRequestsFailed: number;
  elapsedMs: number;
  /** A client of the demo database (never launched), still open for the report; shut it down after. */
  cairn: Cairn;
}

/**
 * How long each phase may take: generous, so a slow machine is not a failed demo, but never a
 * hang. A real model answers in seconds, not in the mock's 100 ms.
 */
const PHASE_TIMEOUT_MS = { mock: 20_000, provider: 90_000 };

/**
 * Submits the support tickets, runs them in a child worker process, and kills that worker with
 * SIGKILL twice — right after a model response was recorded, then right after the payment service
 * made a refund and before the refund tool's checkpoint — starting a new one each time, while this
 * process approves the refunds. Returns once every ticket's run has ended, with the client still
 * open for the report.
 */
export async function runDemo(options: DemoOptions): Promise<DemoRun> {
  const workerPath = fileURLToPath(new URL("./worker.js", import.meta.url));
  if (!existsSync(workerPath)) throw new CliError(`the demo worker is missing (${workerPath})`, "build first: npm run build");
  const provider = configuredProvider(process.env);
  const directory = mkdtempSync(join(tmpdir(), "cairn-demo-"));
  const database = options.database ?? join(directory, "cairn.db");
  // A database of the user's may hold an earlier demo's runs: new ids keep these fresh.
  const suffix = options.database === undefined ? "" : `-${randomBytes(3).toString("hex")}`;
  const tickets = TICKETS.map((t) => ({ ...t, runId: `ticket-${t.orderId}${suffix}` }));
  const runIds = tickets.map((t) => t.runId);
  const timeoutMs = provider === undefined ? PHASE_TIMEOUT_MS.mock : PHASE_TIMEOUT_MS.provider;
  const narrator = new Narrator(options.quiet, Math.max(...runIds.map((id) => id.length)));
  const say = (text: string) => narrator.say(text);
  const payments = new PaymentService(directory, `the demo (pid ${process.pid})`);

  let mock: MockLlm | undefined;
  let cairn: Cairn | undefined;
  let journal: JournalWatch | undefined;
  let approver: Approver | undefined;
  let workers: DemoWorkers | undefined;
  const stopWatching = async () => {
    await approver?.stop();
    await journal?.stop();
  };
  try {
    if (provider === undefined) mock = await startMockLlm({ script: REFUND_SCRIPT, latencyMs: MOCK_LATENCY_MS });
    const model: ModelConfig = provider ?? { baseURL: mock!.url, modelId: MOCK_MODEL_ID, apiKey: undefined, mock: true };
    if (!options.quiet) intro(model, database, payments, tickets, options.database === undefined);

    // This process is a client: it submits the tickets and decides approvals, and executes nothing.
    const client = new Cairn({ database, appVersion: DEMO_APP_VERSION, onError: () => undefined });
    cairn = client;
    const support = registerSupportAgent(client, { model: languageModel(model), payments, emit: () => undefined });
    for (const ticket of tickets) await support.start({ prompt: ticket.prompt }, { id: ticket.runId });

    const watch = new JournalWatch(storeOf(client), runIds, (entry) => narrator.entry(entry));
    journal = watch;
    watch.start();
    let approverError: unknown;
    approver = new Approver(
      client,
      runIds,
      (approval, waitedMs) => narrator.approved(approval, waitedMs),
      (error) => {
        approverError = error;
        say(red(`the approver failed: ${error instanceof Error ? error.message : String(error)}`));
      },
    );
    const env = { CAIRN_DATABASE: database, CAIRN_DEMO_DIR: directory, CAIRN_DEMO_RUNS: runIds.join(","), ...modelEnv(model) };
    const pool: DemoWorkers = new DemoWorkers(workerPath, env, narrator, watch, () => mock?.requestCount() ?? pool.requestsSent);
    workers = pool;

    // 1. Killed right after the model's last response was recorded: every ticket has asked for its refund.
    pool.start(`starts an executor; it claims the ${tickets.length} tickets this process submitted`);
    const asked = await pool.whileAlive(
      watch.until("every ticket's model call asking for a refund", timeoutMs, () => {
        const waiting = runIds.filter((id) => watch.entries.some((e) => e.runId === id && asksForRefund(e.detail)));
        if (!runIds.every((id) => waiting.includes(id) || watch.ended(id))) return undefined;
        return { last: watch.entries.filter((e) => e.kind === "model").at(-1), waiting: waiting.length };
      }),
    );
    const first = await pool.kill(
      "model-response",
      asked.last?.runId ?? runIds[0]!,
      async () => false,
      () =>
        (asked.last === undefined ? "" : `right after ${asked.last.runId}'s model response (seq ${asked.last.seq}) was recorded; `) +
        (asked.waiting === runIds.length
          ? "every ticket now waits for a refund approval"
          : `${asked.waiting} ticket${asked.waiting === 1 ? " waits" : "s wait"} for a refund approval, the others ended`),
    );

    // 2. Killed right after the payment service made a refund, before the refund tool's checkpoint.
    const second = pool.start(`starts; its executor sees pid ${first.pid} is gone and recovers the runs from the journal`);
    say(`  ${dim(`the approver, ${APPROVER} in this process (pid ${process.pid}), approves each refund ${APPROVAL_DELAY_MS} ms after it is requested`)}`);
    approver.start();
    const refunded = await Promise.race([
      second.waitFor("refund", timeoutMs, (m) => !m.deduplicated),
      watch.until("every ticket's run to end", timeoutMs, () => (runIds.every((id) => watch.ended(id)) ? ("ended" as const) : undefined)),
    ]).catch((error: unknown) => {
      throw approverError ?? error;
    });
    if (refunded === "ended") {
      say(dim("every run ended without a refund: the model never asked for one, so there is no refund to kill inside"));
    } else {
      // Said only after looking: on a machine slow enough, the checkpoint could have won the race.
      await pool.kill(
        "refund",
        refunded.runId,
        async () => (await refundCheckpoints(client, refunded.runId)) > 0,
        ({ tooLate }) =>
          tooLate
            ? `after the payment service refunded order ${refunded.orderId}, but too late: the refund's checkpoint had already committed`
            : `after the payment service refunded order ${refunded.orderId} and before the refund tool's checkpoint (no refund in ${refunded.runId}'s journal)`,
      );
      pool.start("starts and recovers the runs; a refund without a checkpoint runs again, with the same idempotency key");
    }

    // 3. The last worker finishes the tickets and exits.
    const last = pool.alive!;
    const done = await last.waitFor("done", timeoutMs);
    const exit = await last.exited;
    if (exit.code !== 0) throw new Error(`worker #${last.number} exited with ${exit.signal ?? `code ${exit.code}`} after the runs ended${pool.tail()}`);
    await watch.poll();
    await stopWatching();
    const succeeded = runIds.filter((id) => watch.statuses.get(id) === "succeeded").length;
    const failures = done.failed.map((f) => `${f.runId}: ${f.message}`).join("; ");
    say(
      succeeded === runIds.length
        ? `${green("✔")} all ${runIds.length} tickets resolved`
        : `${red("✖")} ${succeeded} of ${runIds.length} tickets resolved${failures === "" ? "" : ` (${failures})`}`,
    );
    const modelRequests = mock?.requestCount() ?? pool.requestsSent;
    await mock?.close();
    return {
      tickets,
      model,
      database,
      directory,
      payments,
      kills: pool.kills,
      modelRequests,
      modelRequestsFailed: pool.requestsFailed,
      elapsedMs: narrator.elapsedMs,
      cairn: client,
    };
  } catch (error) {
    await workers?.alive?.kill();
    await stopWatching().catch(() => undefined);
    await mock?.close();
    await cairn?.shutdown().catch(() => undefined);
    if (error instanceof CliError) throw error;
    const message = error instanceof Error ? error.message : String(error);
    throw new CliError(`the demo failed: ${message}`, `its files are in ${directory}; please report this`);
  }
}

function intro(model: ModelConfig, database: string, payments: PaymentService, tickets: readonly TicketRun[], fresh: boolean): void {
  const backend = isPostgres(database) ? "PostgreSQL" : "SQLite";
  print(bold("Cairn demo: a support agent resolves 3 refund tickets while its worker process is killed twice with SIGKILL"));
  print();
  print(`  ${dim("agent")}     support: lookUpOrder → refund (needs a human's approval) → answer`);
  print(
    `  ${dim("model")}     ${describeModel(model)}` +
      (model.mock ? ` (offline, scripted, ${MOCK_LATENCY_MS} ms a call)` : "") +
      `; priced at $${DEMO_PRICING.inputPerMillion} / $${DEMO_PRICING.outputPerMillion} per million tokens in / out`,
  );
  for (const [i, ticket] of tickets.entries())
    print(`  ${dim(i === 0 ? "tickets" : "")}${" ".repeat(i === 0 ? 3 : 10)}${ticket.runId}: "${ticket.prompt}"`);
  print(`  ${dim("database")}  ${displayName(database)} (${backend}${fresh ? ", fresh" : ""})`);
  print(`  ${dim("payments")}  ${payments.ledgerPath} (the payment service's ledger; it deduplicates by idempotency key)`);
  print();
}

/** A model response (an excerpt, tool calls in brackets) that calls the refund tool. */
function asksForRefund(detail: string | null): boolean {
  return detail !== null && detail.includes("[refund(");
}

async function refundCheckpoints(cairn: Cairn, runId: string): Promise<number> {
  const rows = await storeOf(cairn).select<{ n: unknown }>("SELECT count(*) AS n FROM cairn_tool_calls WHERE run_id = $1 AND tool_name = 'refund'", [
    runId,
  ]);
  return Number(rows[0]?.n ?? 0);
}

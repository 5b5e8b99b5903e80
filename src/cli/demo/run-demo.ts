import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { RunRow, Store } from "../../store/store.js";
import { CliError } from "../cli-error.js";
import { displayName, isPostgres, openReadStore } from "../database.js";
import { formatClock, formatDuration, print, renderValue } from "../output.js";
import { bold, dim, green, red } from "../style.js";
import { DemoLedger } from "./ledger.js";
import { Narrator } from "./narrator.js";
import { SLEEP, STEPS } from "./order-workflow.js";
import { WorkerProcess } from "./worker-process.js";

export interface DemoOptions {
  /** Default: a fresh SQLite file in a new temporary directory. */
  database?: string;
  /** Print nothing as it happens (the caller prints a JSON summary). */
  quiet: boolean;
}

export interface Kill {
  worker: number;
  pid: number;
  atMs: number;
  during: "charge-card" | "sleep";
}

export interface DemoRun {
  runId: string;
  database: string;
  directory: string;
  ledger: DemoLedger;
  kills: Kill[];
  elapsedMs: number;
  store: Store;
  run: RunRow;
}

/** Each phase's deadline: generous, so a slow machine is not a failed demo, but never a hang. */
const PHASE_TIMEOUT_MS = 20_000;

/**
 * Runs the order workflow in a child process, kills it with SIGKILL twice — inside the charge step
 * after the card was charged, then while the run sleeps — and starts it again each time, until the
 * run finishes. Returns with the read-only store still open, for the report.
 */
export async function runDemo(options: DemoOptions): Promise<DemoRun> {
  const workerPath = fileURLToPath(new URL("./worker.js", import.meta.url));
  if (!existsSync(workerPath)) throw new CliError(`the demo worker is missing (${workerPath})`, "build first: npm run build");
  const directory = mkdtempSync(join(tmpdir(), "cairn-demo-"));
  const database = options.database ?? join(directory, "cairn.db");
  // A database of the user's may hold an earlier demo's run: a new id keeps this one fresh.
  const runId = options.database === undefined ? "order-1042" : `order-1042-${randomBytes(3).toString("hex")}`;
  const ledger = new DemoLedger(directory);
  const narrator = new Narrator(options.quiet);
  const say = (text: string) => narrator.say(text);
  const kills: Kill[] = [];
  if (!options.quiet) intro(database, ledger, options.database === undefined);

  const spawnWorker = (number: number) =>
    new WorkerProcess(number, workerPath, { database, directory, runId }, (marker, worker) => narrator.marker(marker, worker.number));
  const kill = async (worker: WorkerProcess, during: Kill["during"]) => {
    await worker.kill();
    kills.push({ worker: worker.number, pid: worker.pid, atMs: narrator.elapsedMs, during });
    if (during === "sleep") narrator.killedWhileAsleep();
  };
  const sayKill = (worker: WorkerProcess, why: string) => say(`${red("✖ SIGKILL")} worker #${worker.number} (pid ${worker.pid}) ${why}`);

  let worker: WorkerProcess | undefined;
  let store: Store | undefined;
  try {
    worker = spawnWorker(1);
    say(`${bold("▶")} worker #1 (pid ${worker.pid}) starts an executor and run ${runId}`);
    await worker.waitFor("charged", PHASE_TIMEOUT_MS, (m) => !m.deduplicated);
    await kill(worker, "charge-card");
    store = await openReadStore(database);
    // Said only after looking: on a machine slow enough, the checkpoint could have won the race.
    const checkpointed = (await store.loadJournal(runId)).some((step) => step.name === "charge-card");
    sayKill(
      worker,
      checkpointed
        ? "inside charge-card, but too late: its checkpoint had already committed"
        : "inside charge-card: the card is charged, the step's result is not checkpointed",
    );

    worker = spawnWorker(2);
    say(`${bold("▶")} worker #2 (pid ${worker.pid}) starts; its executor sees worker #1's pid is gone and recovers ${runId}`);
    await worker.waitFor("sleeping", PHASE_TIMEOUT_MS);
    const asleep = await waitForStatus(store, runId, "waiting");
    await kill(worker, "sleep");
    sayKill(worker, `while ${runId} sleeps in the database (status waiting, ${wakeText(asleep)})`);

    worker = spawnWorker(3);
    say(`${bold("▶")} worker #3 (pid ${worker.pid}) starts; its executor claims ${runId} when the wake-up time comes`);
    const done = await worker.waitFor("done", PHASE_TIMEOUT_MS);
    const exit = await worker.exited;
    if (exit.code !== 0) throw new Error(`worker #3 exited with ${exit.signal ?? `code ${exit.code}`} after the run finished`);
    const run = await waitForStatus(store, runId, "succeeded");
    say(`${green("✔")} run ${runId} succeeded after ${formatDuration(run.finishedAt! - run.createdAt)}: ${renderValue(done.output, 90)}`);
    return { runId, database, directory, ledger, kills, elapsedMs: narrator.elapsedMs, store, run };
  } catch (error) {
    await worker?.kill();
    await store?.close();
    if (error instanceof CliError) throw error;
    const message = error instanceof Error ? error.message : String(error);
    throw new CliError(`the demo failed: ${message}`, `its files are in ${directory}; please report this`);
  }
}

function intro(database: string, ledger: DemoLedger, fresh: boolean): void {
  const backend = isPostgres(database) ? "PostgreSQL" : "SQLite";
  print(bold("Cairn demo: an order workflow, killed twice with SIGKILL, still does every side effect once"));
  print();
  print(`  ${dim("workflow")}  order: ${STEPS[0]} → ${STEPS[1]} → sleep ${formatDuration(SLEEP.delayMs)} (${SLEEP.name}) → ${STEPS[2]}`);
  print(`  ${dim("database")}  ${displayName(database)} (${backend}${fresh ? ", fresh" : ""})`);
  print(`  ${dim("ledgers")}   ${ledger.effectsPath}  (a line per side effect)`);
  print(`            ${ledger.paymentsPath} (the payment provider's charges, deduplicated by idempotency key)`);
  print();
}

async function waitForStatus(store: Store, runId: string, status: RunRow["status"]): Promise<RunRow> {
  const deadline = Date.now() + PHASE_TIMEOUT_MS;
  for (;;) {
    const run = await store.getRun(runId);
    if (run?.status === status) return run;
    if (Date.now() > deadline) throw new Error(`run ${runId} did not become ${status} (it is ${run?.status ?? "missing"})`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function wakeText(run: RunRow): string {
  if (run.wakeAt === null) return "no wake-up time";
  return `wakes at ${formatClock(run.wakeAt)}, in ${formatDuration(run.wakeAt - Date.now())}`;
}

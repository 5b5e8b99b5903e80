/**
 * The Cairn arms: `cairn.agent` with durable tools that pass `idempotencyKey(options)` to the
 * services, an "approve" permission on the charge (the supervisor's approver decides through
 * `cairn.approvals`), and the billing sub-agent as a child run via `agents`. Every worker is an
 * executor on the shared database: it makes sure its slot's tasks are started (idempotent by run
 * id) and waits for every task; after a crash, whichever executor looks first recovers the runs.
 */

import { Cairn, RunNotFoundError } from "../../../src/index.js";
import { idempotencyKey, type AgentOutput } from "../../../src/ai/index.js";
import { APPROVAL_TOOL, BILLING_SYSTEM, DELEGATION_DESCRIPTION, DELEGATION_TOOL, PRICING, promptOf, SUPPORT_SYSTEM } from "../workload.js";
import type { Marker } from "../markers.js";
import { errorText, WorkerKit } from "./worker-kit.js";
import type { WorkerConfig } from "./worker-config.js";
import { billingTools, supportTools } from "./workload-tools.js";
import { runtimeOf, storeOf } from "../../internal.js";

/** Every process of the experiment records and recovers runs under this version. */
export const APP_VERSION = "cairn-experiment";

export function runIdOf(task: number): string {
  return `task-${task}`;
}

export async function runCairnWorker(config: WorkerConfig): Promise<void> {
  if (config.database === undefined) throw new Error("the Cairn worker needs config.database");
  const kit = new WorkerKit(config);
  const cairn = new Cairn({
    database: config.database,
    appVersion: APP_VERSION,
    ...(config.pollIntervalMs === undefined ? {} : { pollIntervalMs: config.pollIntervalMs }),
    onError: (error) => process.stderr.write(`[cairn onError] ${errorText(error)}\n`),
  });
  const keyOf = idempotencyKey;
  const billing = cairn.agent("billing", {
    model: kit.model("billing"),
    system: BILLING_SYSTEM,
    tools: billingTools(kit, keyOf),
    pricing: PRICING,
    maxSteps: 6,
  });
  const support = cairn.agent("support", {
    model: kit.model("support"),
    system: SUPPORT_SYSTEM,
    tools: supportTools(kit, keyOf),
    permissions: { [APPROVAL_TOOL]: "approve" },
    agents: { [DELEGATION_TOOL]: { agent: billing, description: DELEGATION_DESCRIPTION } },
    pricing: PRICING,
    maxSteps: 12,
  });
  await cairn.launch();
  try {
    if (config.mode === "replay") {
      kit.emit(await replay(cairn, config.tasks));
      return;
    }
    const start = async () => {
      for (const task of config.tasks) {
        await kit.arrival(task);
        await support.start({ prompt: promptOf(task) }, { id: runIdOf(task) });
      }
    };
    await Promise.all([start(), ...config.awaitTasks.map((task) => awaitTask(cairn, kit, task))]);
    kit.emit({ e: "worker-done", t: Date.now() });
  } finally {
    await cairn.shutdown();
  }
}

/** Waits for the task's run to end (it may not exist yet: another slot starts it) and reports it. */
async function awaitTask(cairn: Cairn, kit: WorkerKit, task: number): Promise<void> {
  const runId = runIdOf(task);
  for (;;) {
    try {
      const row = await runtimeOf(cairn).waitForRun(runId);
      if (row.status === "succeeded") {
        const output = await cairn.run<AgentOutput>(runId).result();
        kit.emit({ e: "task-done", task, text: output.text, t: Date.now() });
      } else {
        kit.emit({ e: "task-failed", task, error: row.error ?? row.status, t: Date.now() });
      }
      return;
    } catch (error) {
      if (!(error instanceof RunNotFoundError)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

const REPLAY_TIMEOUT_MS = 30_000;

/**
 * Re-runs each finished task from its journal: a fork that reuses every recorded step (`fromSeq`
 * past the last), so the agent's code executes again over the record while the model and the
 * services are unreachable (the supervisor points this worker at closed ports). Identical: the
 * same output and not one step more than the original recorded.
 */
async function replay(cairn: Cairn, tasks: readonly number[]): Promise<Marker> {
  let identical = 0;
  const problems: string[] = [];
  for (const task of tasks) {
    const runId = runIdOf(task);
    try {
      const original = await cairn.run<AgentOutput>(runId).result();
      const steps = async (id: string) =>
        Number((await storeOf(cairn).select<{ n: unknown }>("SELECT count(*) AS n FROM cairn_steps WHERE run_id = $1", [id]))[0]?.n ?? 0);
      const [last] = await storeOf(cairn).select<{ seq: unknown }>("SELECT max(seq) AS seq FROM cairn_steps WHERE run_id = $1", [runId]);
      const fork = await cairn.fork<AgentOutput>(runId, { fromSeq: Number(last?.seq ?? -1) + 1, id: `${runId}-replay` });
      const replayed = await Promise.race([
        fork.result(),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no result within ${REPLAY_TIMEOUT_MS} ms`)), REPLAY_TIMEOUT_MS).unref()),
      ]);
      const same = JSON.stringify(replayed) === JSON.stringify(original);
      const [before, after] = [await steps(runId), await steps(fork.id)];
      if (same && before === after) identical++;
      else problems.push(`${runId}: ${same ? `${after} steps instead of ${before}` : "a different output"}`);
    } catch (error) {
      problems.push(`${runId}: ${errorText(error)}`);
    }
  }
  const detail =
    problems.length === 0
      ? `forked each finished run past its last step and re-ran it with the model and services unreachable: same output, no new step`
      : problems.slice(0, 3).join("; ");
  return { e: "replay", runs: tasks.length, identical, detail };
}

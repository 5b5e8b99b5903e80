import { Cairn, type Workflow } from "../../../src/index.js";
import { storeOf } from "../../internal.js";
import type { BenchInput, Producer, QueueSystem, Worker } from "./system.js";

/**
 * Cairn with default options: an executor is a launched Cairn; the producer is a Cairn that is
 * not launched (a client), whose `workflow.start()` commits an enqueued run for the executors to
 * claim — or, sharing one process with the executor (`local`), starts the run on that executor at
 * once. When the queues API lands, an `enqueue` variant is the producer's one line:
 * `wf.enqueue("bench", input, { id })` instead of `wf.start(input, { id })`.
 */
interface CairnWorker extends Worker {
  cairn: Cairn;
  workflow: Workflow<BenchInput, number>;
}

function register(cairn: Cairn, onStart: (input: BenchInput) => void): Workflow<BenchInput, number> {
  return cairn.workflow("bench", async (ctx, input: BenchInput) => {
    onStart(input);
    return ctx.step("work", () => input.i);
  });
}

export const cairnSystem: QueueSystem = {
  name: "cairn",
  settings: "defaults: wake-ups by LISTEN/NOTIFY on PostgreSQL, poll 500 ms (PostgreSQL) / 200 ms (SQLite); maxConcurrentRuns 1000",
  async prepare(database) {
    const cairn = new Cairn({ database });
    register(cairn, () => undefined);
    await storeOf(cairn).migrate();
    await cairn.shutdown();
  },
  async startWorker(database, _index, onStart): Promise<CairnWorker> {
    const cairn = new Cairn({ database, onError: (error) => console.error("[cairn worker]", error) });
    const workflow = register(cairn, onStart);
    await cairn.launch();
    return { cairn, workflow, stop: () => cairn.shutdown() };
  },
  async openProducer(database, local): Promise<Producer> {
    const shared = local as CairnWorker | undefined;
    const cairn = shared?.cairn ?? new Cairn({ database });
    const workflow = shared?.workflow ?? register(cairn, () => undefined);
    const store = storeOf(cairn);
    return {
      async enqueue(id, input) {
        await workflow.start(input, { id });
      },
      async completed() {
        return Number((await store.query("SELECT count(*) AS n FROM cairn_runs WHERE status = 'succeeded'")).rows[0]?.n);
      },
      async close() {
        if (shared === undefined) await cairn.shutdown();
      },
    };
  },
};

import { Cairn, type Workflow } from "../../../src/index.js";
import { storeOf } from "../../internal.js";
import { probeEvent, probeStore } from "./probe.js";
import { now, PER_PROCESS_CONCURRENCY, type BenchInput, type Producer, type QueueSystem, type Worker } from "./system.js";

/**
 * Cairn with default options: an executor is a launched Cairn; the producer is a Cairn that is
 * not launched (a client), whose `workflow.start()` commits an enqueued run for the executors to
 * claim — or, sharing one process with the executor (`local`), starts the run on that executor at
 * once. The `enqueue` variant (`cairnQueueSystem`) declares queue "bench" (workerConcurrency 16,
 * no other limit) in every process and submits with `wf.enqueue("bench", input, { id })`: the
 * runs go through the queue's Task rows and the SQL dispatch policy (FIFO) instead of the implicit
 * default queue.
 */
interface CairnWorker extends Worker {
  cairn: Cairn;
  workflow: Workflow<BenchInput, number>;
}

const QUEUE = "bench";

function declare(cairn: Cairn, queued: boolean): Cairn {
  if (queued) cairn.queue(QUEUE, { workerConcurrency: PER_PROCESS_CONCURRENCY });
  return cairn;
}

function register(cairn: Cairn, onStart: (input: BenchInput) => void, who = "?"): Workflow<BenchInput, number> {
  return cairn.workflow("bench", async (ctx, input: BenchInput) => {
    if (input.report) probeEvent(who, `body:${input.i}`, now());
    onStart(input);
    return ctx.step("work", () => input.i);
  });
}

function cairnSystemWith(queued: boolean): QueueSystem {
  return {
    name: queued ? "cairn-queue" : "cairn",
    settings: queued
      ? `enqueue() on queue "${QUEUE}" (workerConcurrency ${PER_PROCESS_CONCURRENCY}, FIFO policy); otherwise as start()`
      : "defaults: wake-ups by LISTEN/NOTIFY on PostgreSQL, poll 500 ms (PostgreSQL) / 200 ms (SQLite); maxConcurrentRuns 1000",
    async prepare(database) {
      const cairn = declare(new Cairn({ database }), queued);
      register(cairn, () => undefined);
      await storeOf(cairn).migrate();
      await cairn.shutdown();
    },
    async startWorker(database, index, onStart): Promise<CairnWorker> {
      const cairn = declare(new Cairn({ database, onError: (error) => console.error("[cairn worker]", error) }), queued);
      const workflow = register(cairn, onStart, `e${index}`);
      probeStore(storeOf(cairn), `e${index}`);
      await cairn.launch();
      return { cairn, workflow, stop: () => cairn.shutdown() };
    },
    async openProducer(database, local): Promise<Producer> {
      const shared = local as CairnWorker | undefined;
      const cairn = shared?.cairn ?? declare(new Cairn({ database }), queued);
      const workflow = shared?.workflow ?? register(cairn, () => undefined);
      const store = storeOf(cairn);
      if (shared === undefined) probeStore(store, "producer", false);
      return {
        async enqueue(id, input) {
          const start = now();
          if (queued) await workflow.enqueue(QUEUE, input, { id });
          else await workflow.start(input, { id });
          if (input.report) probeEvent("producer", `enqueue:${input.i}`, start, now());
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
}

export const cairnSystem: QueueSystem = cairnSystemWith(false);
export const cairnQueueSystem: QueueSystem = cairnSystemWith(true);

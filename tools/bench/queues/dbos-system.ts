import { DBOS, DBOSClient } from "@dbos-inc/dbos-sdk";
import { PER_PROCESS_CONCURRENCY, quietPool, type BenchInput, type Producer, type QueueSystem } from "./system.js";

/**
 * DBOS Transact queues: each executor process launches DBOS with the workflow (one `DBOS.runStep`)
 * and the queue registered; the producer enqueues with `DBOSClient.enqueue`, as another service
 * would. DBOS's queue dispatch polls the queue (default interval, 1 s, backing off when contended).
 */
const APP = "cairn-queues-bench";
const QUEUE = "bench";

export const dbosSystem: QueueSystem = {
  name: "dbos",
  settings: `defaults: queue polling (minPollingIntervalMs 1000); workerConcurrency ${PER_PROCESS_CONCURRENCY}`,
  async prepare(database) {
    // DBOS migrates its system database at launch, and concurrent first launches race on a fresh
    // one: launch once here (this process runs no DBOS workflow), then let the executors join.
    DBOS.setConfig({ name: APP, systemDatabaseUrl: database, logLevel: "error" });
    await DBOS.launch();
    await DBOS.registerQueue(QUEUE, { workerConcurrency: PER_PROCESS_CONCURRENCY, onConflict: "always_update" });
    await DBOS.shutdown({ deregister: true });
  },
  async startWorker(database, _index, onStart) {
    DBOS.registerWorkflow(
      async (input: BenchInput) => {
        onStart(input);
        return DBOS.runStep(async () => input.i, { name: "work" });
      },
      { name: "bench" },
    );
    DBOS.setConfig({ name: APP, systemDatabaseUrl: database, logLevel: "error" });
    await DBOS.launch();
    await DBOS.registerQueue(QUEUE, { workerConcurrency: PER_PROCESS_CONCURRENCY, onConflict: "always_update" });
    return { stop: () => DBOS.shutdown() };
  },
  async openProducer(database): Promise<Producer> {
    const client = await DBOSClient.create({ systemDatabaseUrl: database, applicationName: APP });
    const reader = quietPool(database, 1);
    return {
      async enqueue(id, input) {
        await client.enqueue({ queueName: QUEUE, workflowName: "bench", workflowID: id }, input);
      },
      async completed() {
        const result = await reader.query<{ n: string }>("SELECT count(*) AS n FROM dbos.workflow_status WHERE status = 'SUCCESS'");
        return Number(result.rows[0]?.n);
      },
      async close() {
        await client.destroy();
        await reader.end();
      },
    };
  },
};

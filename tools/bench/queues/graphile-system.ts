import { Logger, makeWorkerUtils, run, runMigrations } from "graphile-worker";
import { PER_PROCESS_CONCURRENCY, quietPool, type BenchInput, type Producer, type QueueSystem } from "./system.js";

/**
 * graphile-worker 0.17: each executor process is a runner with `concurrency` job slots, woken by
 * LISTEN/NOTIFY (polling every 2 s as a fallback); the producer calls `addJob`. A completed job is
 * deleted, so completions are counted as jobs added minus jobs left.
 */
const TASK = "bench";

export function graphileSystem(): QueueSystem {
  let added = 0;
  return {
    name: "graphile-worker",
    settings: `defaults: LISTEN/NOTIFY, pollInterval 2000 ms; concurrency ${PER_PROCESS_CONCURRENCY} per process`,
    async prepare(database) {
      await runMigrations({ connectionString: database, logger: quiet });
    },
    async startWorker(database, _index, onStart) {
      // Our own pool, with an error listener: the bench's clean-up terminates the sessions of a
      // measurement's database, and graphile-worker's own pool had none for an idle connection's
      // error — the whole bench died with it (about one run in three with 1,000 latency samples).
      const pgPool = quietPool(database, PER_PROCESS_CONCURRENCY + 2);
      const runner = await run({
        pgPool,
        concurrency: PER_PROCESS_CONCURRENCY,
        noHandleSignals: true,
        logger: quiet,
        taskList: {
          [TASK]: async (payload) => {
            onStart(payload as BenchInput);
          },
        },
      });
      return {
        stop: async () => {
          await runner.stop();
          await pgPool.end();
        },
      };
    },
    async openProducer(database): Promise<Producer> {
      // The producer's pool too gets an error listener (as the runners' above): makeWorkerUtils's
      // own had none, and the clean-up's termination of its idle connection killed the bench.
      const pgPool = quietPool(database, 4);
      const utils = await makeWorkerUtils({ pgPool, logger: quiet });
      const reader = quietPool(database, 1);
      return {
        async enqueue(id, input) {
          await utils.addJob(TASK, input, { jobKey: id });
          added++;
        },
        async completed() {
          const result = await reader.query<{ n: string }>("SELECT count(*) AS n FROM graphile_worker._private_jobs");
          return added - Number(result.rows[0]?.n);
        },
        async close() {
          await utils.release();
          await pgPool.end();
          await reader.end();
        },
      };
    },
  };
}

const quiet = new Logger(() => (level: string, message: string) => {
  if (level === "error") console.error("[graphile-worker]", message);
});

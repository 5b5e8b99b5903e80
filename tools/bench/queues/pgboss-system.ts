import PgBoss from "pg-boss";
import { PER_PROCESS_CONCURRENCY, quietPool, type BenchInput, type Producer, type QueueSystem } from "./system.js";

/**
 * pg-boss 10: each executor process runs `boss.work` loops on one queue; the producer `boss.send`s.
 * pg-boss polls (no LISTEN/NOTIFY); a loop that found work fetches again at once, an idle one waits
 * its polling interval (default 2 s). A job is the whole unit here: no durable step inside it.
 */
const QUEUE = "bench";
const LOOPS = 2;
const BATCH = PER_PROCESS_CONCURRENCY / LOOPS;

export const pgBossSystem: QueueSystem = {
  name: "pg-boss",
  settings: `defaults: polling every 2 s when idle; ${LOOPS} work loops × batchSize ${BATCH} per process`,
  async prepare(database) {
    const boss = new PgBoss({ connectionString: database, supervise: false, schedule: false });
    boss.on("error", (error) => console.error("[pg-boss]", error));
    await boss.start();
    await boss.createQueue(QUEUE);
    await boss.stop({ graceful: false, wait: true });
  },
  async startWorker(database, _index, onStart) {
    const boss = new PgBoss({ connectionString: database, schedule: false });
    boss.on("error", (error) => console.error("[pg-boss]", error));
    await boss.start();
    for (let loop = 0; loop < LOOPS; loop++) {
      await boss.work<BenchInput>(QUEUE, { batchSize: BATCH }, async (jobs) => {
        for (const job of jobs) onStart(job.data);
      });
    }
    return { stop: () => boss.stop({ graceful: false, wait: true }) };
  },
  async openProducer(database): Promise<Producer> {
    const boss = new PgBoss({ connectionString: database, supervise: false, schedule: false });
    boss.on("error", (error) => console.error("[pg-boss]", error));
    await boss.start();
    const reader = quietPool(database, 1);
    return {
      async enqueue(id, input) {
        await boss.send(QUEUE, input as unknown as object, { id: uuidOf(id) });
      },
      async completed() {
        const result = await reader.query<{ n: string }>("SELECT count(*) AS n FROM pgboss.job WHERE name = $1 AND state = 'completed'", [QUEUE]);
        return Number(result.rows[0]?.n);
      },
      async close() {
        await boss.stop({ graceful: false, wait: true });
        await reader.end();
      },
    };
  },
};

/** pg-boss ids are UUIDs: the run index as the last digits of one. */
function uuidOf(id: string): string {
  const digits = id.replace(/\D/g, "").padStart(12, "0").slice(-12);
  return `00000000-0000-4000-8000-${digits}`;
}

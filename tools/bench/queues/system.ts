import pg from "pg";

/**
 * A queue system under test, split the way it runs in production: executors (worker processes,
 * `startWorker`) and a producer (`openProducer`) on the same database. Each system runs the same
 * job: a one-step workflow (or, for the job queues, one job) whose body reports when it began, so
 * enqueue-to-start latency is measured from the producer's enqueue call to the body's first line.
 */

/** What every run carries: its index, when it was enqueued (epoch ms, high resolution), and whether to report its start. */
export interface BenchInput {
  i: number;
  t: number;
  report: boolean;
}

/** Epoch milliseconds with sub-millisecond resolution, comparable between processes on one machine. */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

export interface Worker {
  stop(): Promise<void>;
}

export interface Producer {
  enqueue(id: string, input: BenchInput): Promise<void>;
  /** How many runs have finished (their completion committed), read from the database. */
  completed(): Promise<number>;
  close(): Promise<void>;
}

export type SystemName = "cairn" | "cairn-queue" | "dbos" | "pg-boss" | "graphile-worker";

export interface QueueSystem {
  readonly name: SystemName;
  /** The settings that shape dispatch (polling, per-process concurrency), for the report. */
  readonly settings: string;
  /** Once, before any worker starts (schemas, queues). */
  prepare(database: string): Promise<void>;
  /** In a worker process: starts executing runs, calling `onStart` as each run's body begins. */
  startWorker(database: string, index: number, onStart: (input: BenchInput) => void): Promise<Worker>;
  /**
   * A producer on `database`. `local` is the worker of this same process when producer and
   * executor share one process (Cairn's in-process start), else undefined.
   */
  openProducer(database: string, local?: Worker): Promise<Producer>;
}

/** Per executor: the most runs one process holds at once, where the system has such a knob. */
export const PER_PROCESS_CONCURRENCY = 16;

/**
 * A pool whose idle connections may die without killing the process: the bench's clean-up
 * terminates the sessions of a measurement's database, and an idle connection's error with no
 * listener is thrown. The next query through the pool reconnects.
 */
export function quietPool(database: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: database, max });
  pool.on("error", () => undefined);
  return pool;
}

/**
 * A worker process's configuration, passed by the supervisor as one JSON environment variable so
 * that both sides share one type.
 */

export const CONFIG_ENV = "CAIRN_EXPERIMENT_WORKER";

export interface WorkerConfig {
  /** Which runtime the worker runs the tasks on. */
  runtime: "conventional" | "langgraph" | "cairn";
  /** "run": execute tasks; "replay": re-run finished tasks from their record and report (`replay` marker). */
  mode: "run" | "replay";
  /** The worker's slot (0, 1, ...): a restarted worker takes its slot's place. */
  slot: number;
  /** The pass's directory (logs, the fired-faults file, SQLite files). */
  dir: string;
  /** The mock LLM (…/v1) and the mock services. */
  llmUrl: string;
  servicesUrl: string;
  /** Tasks this worker starts (or, for Cairn, makes sure are started). */
  tasks: number[];
  /** Tasks whose end this worker waits for before exiting (Cairn: every task; others: its own). */
  awaitTasks: number[];
  /**
   * Tasks arrive over time, as work does: task n is due at `startAt + (n - 1) * arrivalIntervalMs`
   * (ms since the epoch). A worker started later starts overdue tasks at once.
   */
  startAt: number;
  arrivalIntervalMs: number;
  /** Scheduled fault points (see fault-schedule.ts); those listed in `firedFile` no longer hang. */
  hang: string[];
  firedFile: string;
  approvalPollMs: number;
  /** Cairn: the database. */
  database?: string;
  /** Cairn: the executor's poll interval (default: Cairn's). */
  pollIntervalMs?: number;
  /** LangGraph: the checkpointer's SQLite file. */
  checkpoints?: string;
  /** Conventional: the application log the worker appends to (what a diagnosis can read). */
  appLog?: string;
}

export function readWorkerConfig(env: NodeJS.ProcessEnv): WorkerConfig {
  const text = env[CONFIG_ENV];
  if (text === undefined || text === "") throw new Error(`${CONFIG_ENV} is not set: the experiment's supervisor starts this worker`);
  return JSON.parse(text) as WorkerConfig;
}

/**
 * What an experiment run is given: the arms to compare, the workload's size, the faults and the
 * seed they are drawn from, and the mock world's timings. `--quick` scales the run down for CI.
 */

/** The runtimes compared, in the order the report lists them. */
export const ARMS = ["conventional", "langgraph", "cairn-sqlite", "cairn-postgres"] as const;

/**
 * - `conventional`: the AI SDK tool loop in a plain worker process, restarted from the beginning by a
 *   supervisor after a crash; no idempotency keys (as most agents run today).
 * - `langgraph`: a LangGraph.js StateGraph with its SQLite checkpointer, resuming its thread after a crash.
 * - `cairn-sqlite`, `cairn-postgres`: `cairn.agent` with durable tools passing idempotency keys.
 */
export type ArmName = (typeof ARMS)[number];

export interface ExperimentSettings {
  /** Agent tasks in the workload; each is one trajectory (see workload.ts). */
  tasks: number;
  /** Faults drawn for the schedule; the same schedule hits every arm. */
  faults: number;
  seed: number;
  arms: ArmName[];
  /** Where results.json, results.md, chart.svg and each pass's files go. */
  out: string;
  quick: boolean;
  /** Worker processes per arm; tasks are spread over them. */
  workers: number;
  /** Tasks arrive this far apart (task n at (n - 1) × the interval after the pass starts). */
  arrivalIntervalMs: number;
  /** The mock model's answer time. */
  modelLatencyMs: number;
  /** The mock services' answer time. */
  serviceLatencyMs: number;
  /** How long the automatic approver waits before approving a request (a human takes a moment). */
  approvalDelayMs: number;
  /** A pass that has not finished by then is stopped; its unfinished tasks count as not completed. */
  passTimeoutMs: number;
  /** The PostgreSQL server the cairn-postgres arm creates fresh databases on. */
  postgresUrl: string;
}

export const LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432/cairn_test";

export const DEFAULT_SEED = 42;

/** The defaults finish in a few minutes on a 2-core machine (the goal: under 15). */
export const DEFAULTS = {
  tasks: 20,
  faults: 6,
  workers: 2,
  arrivalIntervalMs: 100,
  modelLatencyMs: 100,
  serviceLatencyMs: 10,
  approvalDelayMs: 250,
  passTimeoutMs: 180_000,
} as const;

/** `--quick`: a CI-sized run (the goal: under 2 minutes for every arm). */
export const QUICK = {
  tasks: 4,
  faults: 6,
  workers: 2,
  arrivalIntervalMs: 25,
  modelLatencyMs: 25,
  serviceLatencyMs: 5,
  approvalDelayMs: 100,
  passTimeoutMs: 60_000,
} as const;

export function isArmName(value: string): value is ArmName {
  return (ARMS as readonly string[]).includes(value);
}

/**
 * The one workflow every arm runs, and the driver that times it.
 *
 * A run is 10 sequential steps; step `i` returns `{ i, at }`, where `at` counts every step
 * executed in this process, so no two steps return the same value and nothing can be served from
 * a cache. Each arm makes the step durable in its own model (a Cairn step, a DBOS step, a
 * LangGraph node followed by its checkpoint) and the run's output is the last step's value.
 */

export const STEPS_PER_RUN = 10;

export interface StepValue {
  i: number;
  at: number;
}

let executed = 0;

export function stepValue(i: number): StepValue {
  return { i, at: executed++ };
}

/** A run whose output is not its last step's value did not run the workflow this benchmark claims. */
export function expectLastStep(output: unknown, runId: string): void {
  const i = typeof output === "object" && output !== null && "i" in output ? output.i : undefined;
  if (i !== STEPS_PER_RUN - 1) throw new Error(`run ${runId} returned ${JSON.stringify(output)}, not its step ${STEPS_PER_RUN - 1}`);
}

export type Mode = "sequential" | "concurrent";
export type Backend = "sqlite" | "postgres";

/** One measurement: the runs' wall time, and each run's own latency (start to result). */
export interface PeerTiming {
  steps: number;
  wallMs: number;
  /** Empty for the raw floors, which have no runs. */
  runLatenciesMs: number[];
}

/**
 * A peer set up to run the workflow. `measure` takes a fresh database, sets the peer up on it
 * (untimed: migrations, launch), times `runs` runs with `inFlight` of them at once, checks what
 * was written, and tears everything down.
 */
export interface Arm {
  readonly name: ArmName;
  readonly backend: Backend;
  /** How a commit reaches the disk, as configured for this arm. */
  readonly durability: string;
  /** The raw floors only loop one row per commit; they have no concurrent mode. */
  readonly modes: readonly Mode[];
  measure(runs: number, inFlight: number): Promise<PeerTiming>;
}

export type ArmName =
  "raw-sqlite" | "cairn-sqlite" | "langgraph-sqlite" | "langgraph-sqlite-defaults" | "raw-postgres" | "cairn-postgres" | "dbos-postgres";

/**
 * Runs `runOne(0 .. runs-1)` with at most `inFlight` running at a time (1: one after another),
 * each started as soon as a slot frees. Wall time is from the first start to the last finish.
 */
export async function driveRuns(runs: number, inFlight: number, runOne: (index: number) => Promise<void>): Promise<PeerTiming> {
  const runLatenciesMs: number[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < runs) {
      const index = next++;
      const t0 = performance.now();
      await runOne(index);
      runLatenciesMs.push(performance.now() - t0);
    }
  };
  const begin = performance.now();
  await Promise.all(Array.from({ length: Math.min(inFlight, runs) }, worker));
  return { steps: runs * STEPS_PER_RUN, wallMs: performance.now() - begin, runLatenciesMs };
}

/** The thing counted in the database after a measurement, against what the runs should have left. */
export function expectCount(what: string, actual: unknown, expected: number): void {
  if (Number(actual) !== expected) throw new Error(`expected ${expected} ${what} after the measurement, found ${String(actual)}`);
}

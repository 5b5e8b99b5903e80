/**
 * What one partition (a PostgreSQL primary, or one range of a distributed SQL engine) and one
 * executor cost, as measured on this machine by `measure.ts`. The simulation is fed nothing else.
 */
export interface Costs {
  /** Where and when they were measured. */
  measuredOn: string;
  /** One run stepping alone: from `ctx.step` called to resolved, mean (a commit's round trip and fsync). */
  stepLatencyUs: number;
  /** One partition's steps per second with many runs stepping at once (group commit), one executor. */
  partitionStepsPerSecond: number;
  /** Executor CPU (user + system) per step in that measurement: what a step costs the executor's one thread. */
  executorCpuPerStepUs: number;
  /** A claim statement: fixed part and per run claimed (`a + b·n`). */
  claimFixedUs: number;
  claimPerRunUs: number;
  /** `workflow.start()` from a client, mean (insert the run, read it back). */
  startLatencyUs: number;
}

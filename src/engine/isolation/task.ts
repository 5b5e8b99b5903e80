/** What the pool (pool.ts) and the crash report (crash.ts) share about one task. */

/** One task for a pool process: the export to run, its input as codec text, and who asks. */
export interface IsolatedTask {
  module: string;
  exportName: string;
  input: string;
  idempotencyKey: string;
  attempt: number;
  maxMemoryMb: number | undefined;
  stepName: string;
  where: string;
  runId: string;
  seq: number;
}

/** What ended a process in the middle of a task (turned into the crash error by crash.ts). */
export class ExitSeen extends Error {
  constructor(
    readonly exitCode: number | null,
    readonly signal: NodeJS.Signals | null,
    readonly stderr: string,
    readonly uncaught: string | null,
    readonly pid: number | null,
  ) {
    super("exit seen");
  }
}

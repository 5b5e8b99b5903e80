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

/**
 * What a pool process may hold besides its V8 heap before its watchdog kills it: Node itself (about
 * 55 MB resident when idle), the young generation and compiled code. So `maxMemoryMb: 256` means a
 * 256 MB heap and at most 384 MB resident, Buffers and native allocations included.
 */
export const RSS_HEADROOM_MB = 128;

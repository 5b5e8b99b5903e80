/**
 * The messages between the pool (pool.ts) and an isolated process (isolated-child.ts), over Node's
 * IPC channel as JSON. Values inside are the journal codec's text, never structured clones: the
 * codec is what decides what a step may return, in a process or not.
 */

/** Parent → process: run one export. A process runs one task at a time. */
export interface RunMessage {
  type: "run";
  id: number;
  module: string;
  exportName: string;
  /** encodeValue(input) */
  input: string;
  idempotencyKey: string;
  attempt: number;
  /** For error messages made in the process ("run r1 seq 3 (\"parse\")"). */
  where: string;
}

export type ChildMessage =
  /** The process is up and listening. */
  | { type: "ready" }
  /** The export returned (`output`: encodeValue) or threw (`error`: errorText). */
  | { type: "result"; id: number; ok: true; output: string }
  | { type: "result"; id: number; ok: false; error: string }
  /** An exception nobody caught (thrown asynchronously): the process is about to exit with it. */
  | { type: "uncaught"; error: string };

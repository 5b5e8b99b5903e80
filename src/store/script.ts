import type { Statement } from "./connection.js";
import type { Fence, NewRun, StepRecord } from "./store.js";

/**
 * A transactional algorithm written once for both backends, as a generator that yields what it
 * needs done — a statement, or one of the few acts whose shape differs per backend — and receives
 * the result. SQLite drives it synchronously inside one better-sqlite3 transaction, so no other
 * JavaScript (a step body, say) runs while it holds the write lock; PostgreSQL drives it with
 * `await`, one round trip per request, on the transaction's connection.
 */
export type Request =
  | { kind: "all"; statement: Statement; params: readonly unknown[] }
  | { kind: "run"; statement: Statement; params: readonly unknown[] }
  | { kind: "act"; act: Act };

/** What each backend does its own way inside a transaction. */
export type Act =
  /** Checks (PostgreSQL: and locks) the fenced run's row; answers a boolean. */
  | { type: "fenceHolds"; fence: Fence }
  | { type: "writeStep"; step: StepRecord }
  | { type: "writeRun"; run: NewRun }
  /** Wakes the run's parent if it is waiting (PostgreSQL: and tells the listening executors). */
  | { type: "wakeParent"; runId: string; at: number }
  /** Tells listening executors that runs became claimable (nothing on SQLite). */
  | { type: "notifyWake" }
  /** Makes concurrent migrators take turns (PostgreSQL: an advisory lock; SQLite's BEGIN IMMEDIATE already does). */
  | { type: "lockMigrations" };

export type Script<T> = Generator<Request, T, unknown>;

export function* all<Row = Record<string, unknown>>(statement: Statement, params: readonly unknown[]): Generator<Request, Row[], unknown> {
  return (yield { kind: "all", statement, params }) as Row[];
}

/** Returns how many rows the statement changed. */
export function* run(statement: Statement, params: readonly unknown[]): Generator<Request, number, unknown> {
  return (yield { kind: "run", statement, params }) as number;
}

export function* act<T = void>(request: Act): Generator<Request, T, unknown> {
  return (yield { kind: "act", act: request }) as T;
}

export function runSync<T>(script: Script<T>, perform: (request: Request) => unknown): T {
  let step = script.next();
  while (!step.done) step = script.next(perform(step.value));
  return step.value;
}

export async function runAsync<T>(script: Script<T>, perform: (request: Request) => Promise<unknown>): Promise<T> {
  let step = script.next();
  while (!step.done) step = script.next(await perform(step.value));
  return step.value;
}

import { afterEach } from "vitest";
import { Cairn, type CairnOptions } from "../src/index.js";
import type { ManualClock } from "../src/testing/index.js";
import type { Backend } from "./backends.js";

/** Opens Cairns on a backend and shuts every one down after each test. */
export function cairnFactory(backend: Backend) {
  const open: Cairn[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.shutdown()));
  });
  return {
    async database(): Promise<string> {
      return backend.freshDatabase();
    },
    /** A new Cairn (not launched) on `database`. */
    cairn(database: string, options: Omit<CairnOptions, "database"> = {}): Cairn {
      const cairn = new Cairn({ database, onError: () => undefined, ...options });
      open.push(cairn);
      return cairn;
    },
  };
}

/** Waits for a condition checked by polling, for state owned by another part of the system. */
export async function eventually<T>(check: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Moves `clock` forward by `stepMs` each time the event loop has turned, until `work` settles: the
 * durable timers a test is about (backoff, attempt timeouts, sleeps) fire in the clock's time, in
 * the order they fall due, with no real waiting for them.
 */
export async function advanceUntilSettled<T>(clock: ManualClock, work: Promise<T>, stepMs: number): Promise<T> {
  let settled = false;
  const done = work.finally(() => (settled = true));
  while (!settled) {
    await new Promise((resolve) => setImmediate(resolve));
    if (!settled) clock.advance(stepMs);
  }
  return done;
}

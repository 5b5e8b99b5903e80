import { afterEach } from "vitest";
import { Cairn, type CairnOptions } from "../src/index.js";
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

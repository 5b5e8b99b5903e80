import { isTransientStoreError } from "./store-errors.js";

/** Classified in store-errors.ts, the one place that reads driver errors. */
export { isTransientStoreError };

/** First wait after a transient failure; doubled each time, up to MAX_BACKOFF_MS. */
export const FIRST_BACKOFF_MS = 50;
export const MAX_BACKOFF_MS = 2_000;

export function backoffMs(failures: number): number {
  return Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** Math.max(0, failures - 1));
}

/**
 * Calls `fn` until it returns, waiting with exponential backoff after each transient store error,
 * for a caller that is waiting anyway (`result()`, `status()`, `getEvent`). Any other error, a
 * transient one after `giveUpAt` (a `Date.now()` time), or `stop()` answering true, is thrown.
 */
export async function retryTransient<T>(fn: () => Promise<T>, options: { giveUpAt: number; stop?: () => boolean }): Promise<T> {
  for (let failures = 1; ; failures++) {
    try {
      return await fn();
    } catch (error) {
      const waitMs = backoffMs(failures);
      if (!isTransientStoreError(error) || options.stop?.() === true || Date.now() + waitMs > options.giveUpAt) throw error;
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }
}

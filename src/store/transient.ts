/**
 * Errors that say the database (or the way to it) failed, not the statement: a connection reset,
 * a server shutting down, a locked SQLite file, a full disk. A run that meets one is loaded again
 * later instead of recording a failure its code never caused.
 */
export function isTransientStoreError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") {
    // node-postgres reports a socket that closed under a client, and a pool that could not hand
    // out a connection in time, with a plain Error that has no code.
    const message = (error as { message?: unknown } | null)?.message;
    return typeof message === "string" && PG_CONNECTION_MESSAGES.some((pattern) => pattern.test(message));
  }
  return (
    code.startsWith("08") || // PostgreSQL connection exceptions
    code.startsWith("57P") || // admin shutdown, crash shutdown, cannot connect now
    code === "53300" || // too many connections
    code === "ECONNRESET" ||
    code === "ECONNREFUSED" ||
    code === "EPIPE" ||
    code === "ETIMEDOUT" ||
    code === "EHOSTUNREACH" ||
    code === "ENETUNREACH" ||
    code === "SQLITE_BUSY" ||
    code === "SQLITE_LOCKED" ||
    code === "SQLITE_FULL" ||
    code.startsWith("SQLITE_IOERR")
  );
}

const PG_CONNECTION_MESSAGES = [
  /^Connection terminated/,
  /not queryable/,
  /^timeout exceeded when trying to connect/,
  /^Client was closed and is not queryable/,
];

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
export async function retryTransient<T>(
  fn: () => Promise<T>,
  options: { giveUpAt: number; stop?: () => boolean },
): Promise<T> {
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

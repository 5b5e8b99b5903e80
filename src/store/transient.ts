/**
 * Errors that say the database (or the way to it) failed, not the statement: a connection reset,
 * a server shutting down, a locked SQLite file, a full disk. A run that meets one is loaded again
 * later instead of recording a failure its code never caused.
 */
export function isTransientStoreError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return false;
  return (
    code.startsWith("08") || // PostgreSQL connection exceptions
    code.startsWith("57P") || // admin shutdown, crash shutdown, cannot connect now
    code === "53300" || // too many connections
    code === "ECONNRESET" ||
    code === "ECONNREFUSED" ||
    code === "EPIPE" ||
    code === "ETIMEDOUT" ||
    code === "SQLITE_BUSY" ||
    code === "SQLITE_LOCKED" ||
    code === "SQLITE_FULL" ||
    code.startsWith("SQLITE_IOERR")
  );
}

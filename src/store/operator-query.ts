import { InvalidSpecError, PermissionDeniedError } from "../errors.js";

/**
 * What `Store.operatorQuery` (behind `cairn sql`) shares between the backends. Each backend refuses
 * what is not a read *in the database itself* — see `sqlite/sqlite-operator-query.ts` and
 * `postgres/postgres-operator-query.ts` for which mechanism refuses what.
 */

/** A few seconds: an operator's query that takes longer is usually a mistake (or an attack). */
export const DEFAULT_OPERATOR_QUERY_TIMEOUT_MS = 5000;

/** The database refused the statement (it writes, reads files, signals sessions, takes locks ...). */
export class OperatorQueryRefusedError extends PermissionDeniedError {
  constructor(what: string, todo: string) {
    super(`refused: cairn sql only reads (${what}) — ${todo}`);
  }
}

export function emptyQuery(): InvalidSpecError {
  return new InvalidSpecError("sql", "", "the query is empty; give one SELECT (or WITH ... SELECT) statement");
}

export function validTimeoutMs(timeoutMs: unknown): number {
  if (timeoutMs === undefined) return DEFAULT_OPERATOR_QUERY_TIMEOUT_MS;
  if (typeof timeoutMs !== "number" || !Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 2_147_483_647) {
    throw new InvalidSpecError("timeoutMs", timeoutMs, "must be an integer number of milliseconds ≥ 1");
  }
  return timeoutMs;
}

export function severalStatements(): OperatorQueryRefusedError {
  return new OperatorQueryRefusedError("one statement at a time; several were given", "give exactly one SELECT statement");
}

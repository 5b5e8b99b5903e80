/**
 * What differs in the SQL the two backends speak (after kysely's dialect/adapter split).
 * Statements and algorithms are written once, in `$n` placeholder style, against this object; a
 * backend supplies its dialect and keeps only what truly differs in how it talks to its database
 * (connections, group commit, transactions, notifications, session liveness).
 */
export interface SqlDialect {
  readonly name: "sqlite" | "postgres";
  /** A parameter that may be null, typed where the database must know its type (`$1::text`). */
  text(param: string): string;
  bigint(param: string): string;
  /** `column` is one of the strings of a list parameter (bound with {@link SqlDialect.list}). */
  inList(column: string, param: string): string;
  /**
   * As `inList`, for lists of thousands (the ids of a batch of runs): a semi-join on the list, so
   * the cost stays O(rows + list) whatever plan the server cached. (PostgreSQL's generic plan for
   * `= ANY($1)` on a table it has no statistics for yet is a scan comparing every row with every
   * element: reading 500 runs back out of 10,000 took 140 ms.)
   */
  inSet(column: string, param: string): string;
  /**
   * A FROM item: the rows of `table` whose `column` is one of a list parameter's strings (bound
   * with {@link SqlDialect.list}), as `alias`, each string looked up by index in turn — for a
   * column that is not unique, where `inSet`'s semi-join may be planned (PostgreSQL, a table it
   * has no statistics for, a generic plan) as a hash of the list and a scan of the whole table:
   * 30–70 ms to read two runs' journals out of 500,000 rows, against 0.1 ms.
   */
  rowsOfEach(param: string, table: string, column: string, alias: string): string;
  /**
   * `column` (a key) is one of the values `subquery` returns — a few — each looked up by index:
   * PostgreSQL takes them as an array made once (an InitPlan), which its planner looks up in the
   * key's index whatever it guesses of the subquery's size; as `IN (subquery)` it could hash the
   * subquery and scan the whole table to probe it.
   */
  inRows(column: string, subquery: string): string;
  /** A list of strings as one parameter. */
  list(values: readonly string[]): unknown;
  /**
   * The executors judged dead, as a table expression with columns `id` and `heartbeat_at`, from a
   * parameter bound with {@link SqlDialect.deadExecutors}.
   */
  deadExecutorTable(param: string): string;
  deadExecutors(dead: readonly { id: string; heartbeatAt: number }[]): unknown;
  /** `a IS NOT DISTINCT FROM b`: equal, or both null. */
  same(a: string, b: string): string;
  /** The larger of two values. */
  greatest(a: string, b: string): string;
  /** Whether the database session with backend pid `column` is open: null where sessions have no pids (SQLite). */
  sessionOpen(column: string): string;
  /** Row locks where the database has them (PostgreSQL); nothing on SQLite, whose writer is alone. */
  forUpdate: string;
  forUpdateSkipLocked: string;
  forShare: string;
}

export const SQLITE: SqlDialect = {
  name: "sqlite",
  text: (param) => param,
  bigint: (param) => param,
  inList: (column, param) => `${column} IN (SELECT value FROM json_each(${param}))`,
  inSet: (column, param) => `${column} IN (SELECT value FROM json_each(${param}))`,
  // CROSS JOIN: SQLite keeps the list as the outer loop.
  rowsOfEach: (param, table, column, alias) =>
    `(SELECT DISTINCT value AS k FROM json_each(${param})) AS l CROSS JOIN ${table} AS ${alias} ON ${alias}.${column} = l.k`,
  inRows: (column, subquery) => `${column} IN (${subquery})`,
  list: (values) => JSON.stringify(values),
  deadExecutorTable: (param) =>
    `(SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.heartbeatAt') AS heartbeat_at FROM json_each(${param}))`,
  deadExecutors: (dead) => JSON.stringify(dead.map((e) => ({ id: e.id, heartbeatAt: e.heartbeatAt }))),
  same: (a, b) => `${a} IS ${b}`,
  greatest: (a, b) => `max(${a}, ${b})`,
  sessionOpen: () => "NULL",
  forUpdate: "",
  forUpdateSkipLocked: "",
  forShare: "",
};

export const POSTGRES: SqlDialect = {
  name: "postgres",
  text: (param) => `${param}::text`,
  bigint: (param) => `${param}::bigint`,
  inList: (column, param) => `${column} = ANY(${param}::text[])`,
  inSet: (column, param) => `${column} IN (SELECT unnest(${param}::text[]))`,
  // `OFFSET 0`: the LATERAL stays a loop over the list (not flattened into a join the planner may hash).
  rowsOfEach: (param, table, column, alias) =>
    `(SELECT DISTINCT unnest(${param}::text[]) AS k) AS l CROSS JOIN LATERAL (SELECT * FROM ${table} WHERE ${column} = l.k OFFSET 0) AS ${alias}`,
  inRows: (column, subquery) => `${column} = ANY(ARRAY(${subquery}))`,
  list: (values) => values,
  deadExecutorTable: (param) => `(SELECT id, "heartbeatAt" AS heartbeat_at FROM json_to_recordset(${param}::json) AS d(id text, "heartbeatAt" bigint))`,
  deadExecutors: (dead) => JSON.stringify(dead.map((e) => ({ id: e.id, heartbeatAt: e.heartbeatAt }))),
  same: (a, b) => `${a} IS NOT DISTINCT FROM ${b}`,
  greatest: (a, b) => `GREATEST(${a}, ${b})`,
  // IN over a subquery, not a correlated EXISTS: planned as one hashed read of the sessions per statement.
  sessionOpen: (column) => `(${column} IN (SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL))`,
  forUpdate: "FOR UPDATE",
  forUpdateSkipLocked: "FOR UPDATE SKIP LOCKED",
  forShare: "FOR SHARE",
};

/**
 * What differs in the SQL the two backends speak. Statements and algorithms are written once,
 * against this object; a backend supplies its dialect and keeps only what truly differs in how it
 * talks to its database (connections, group commit, notifications, session liveness).
 */
export interface SqlDialect {
  readonly name: "sqlite" | "postgres";
}

export const SQLITE: SqlDialect = { name: "sqlite" };
export const POSTGRES: SqlDialect = { name: "postgres" };

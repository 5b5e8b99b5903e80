import type Database from "better-sqlite3";
import type { ClientBase, Pool, QueryConfig } from "pg";

/**
 * One statement written once for both backends: `$n` placeholders, and a name under which it is
 * prepared once (PostgreSQL prepares it under the name; SQLite caches it by text). A statement
 * without a name (text built per call, such as an `IN` list) is compiled for that call only.
 */
export interface Statement {
  name?: string;
  text: string;
}

/** Where a statement written once runs: a SQLite connection, a PostgreSQL pool or client. */
export interface Connection {
  all<Row = Record<string, unknown>>(statement: Statement, params: readonly unknown[]): Promise<Row[]>;
  /** Returns how many rows the statement changed. */
  run(statement: Statement, params: readonly unknown[]): Promise<number>;
}

/** A statement compiled for better-sqlite3: `?` placeholders and which parameter each one takes. */
export interface Compiled {
  statement: Database.Statement;
  /** null when the `$n` appear once each, in order: the parameters bind as given. */
  order: number[] | null;
}

/**
 * `$n` statements on better-sqlite3, each compiled once per distinct text (compiling was a fifth
 * of a short run's CPU): `$n` become `?` and the parameters are reordered to match.
 */
export class SqliteStatements {
  private readonly cache = new Map<string, Compiled>();

  constructor(private readonly db: Database.Database) {}

  compiled(text: string): Compiled {
    let compiled = this.cache.get(text);
    if (compiled === undefined) {
      const { text: positional, order } = toPositional(text);
      const inOrder = order.every((index, i) => index === i);
      compiled = { statement: this.db.prepare(positional), order: inOrder ? null : order };
      this.cache.set(text, compiled);
    }
    return compiled;
  }

  all<Row>(text: string, params: readonly unknown[]): Row[] {
    const { statement, order } = this.compiled(text);
    const bound = order === null ? params : order.map((i) => params[i]);
    return (statement.reader ? statement.all(...bound) : (statement.run(...bound), [])) as Row[];
  }

  run(text: string, params: readonly unknown[]): number {
    const { statement, order } = this.compiled(text);
    return statement.run(...(order === null ? params : order.map((i) => params[i]))).changes;
  }

  /** A statement of a script (`script.ts`): prepared once when named, compiled for the call when not. */
  perform(kind: "all" | "run", statement: Statement, params: readonly unknown[]): unknown {
    if (statement.name === undefined) return this.once(statement.text, params, kind === "all");
    return kind === "all" ? this.all(statement.text, params) : this.run(statement.text, params);
  }

  connection(): Connection {
    return {
      all: async <Row>(statement: Statement, params: readonly unknown[]) =>
        statement.name === undefined ? this.once<Row[]>(statement.text, params, true) : this.all<Row>(statement.text, params),
      run: async (statement: Statement, params: readonly unknown[]) =>
        statement.name === undefined ? this.once<number>(statement.text, params, false) : this.run(statement.text, params),
    };
  }

  /** A statement compiled for this call only (its text is built per call). */
  once<T>(text: string, params: readonly unknown[], rows: boolean): T {
    const q = toPositional(text);
    const statement = this.db.prepare(q.text);
    const bound = q.order.map((i) => params[i]);
    if (!rows) return statement.run(...bound).changes as T;
    return (statement.reader ? statement.all(...bound) : (statement.run(...bound), [])) as T;
  }
}

export function postgresConnection(db: Pool | ClientBase): Connection {
  return {
    async all<Row>(statement: Statement, params: readonly unknown[]): Promise<Row[]> {
      return (await db.query(query(statement, params))).rows as Row[];
    },
    async run(statement: Statement, params: readonly unknown[]): Promise<number> {
      return (await db.query(query(statement, params))).rowCount ?? 0;
    },
  };
}

function query(statement: Statement, params: readonly unknown[]): QueryConfig {
  const values = params as unknown[];
  return statement.name === undefined ? { text: statement.text, values } : { name: statement.name, text: statement.text, values };
}

/**
 * Rewrites `$1, $2, ...` placeholders to positional `?`, returning which parameter (0-based) each
 * `?` takes. `$` inside quoted strings and identifiers is left alone.
 */
export function toPositional(text: string): { text: string; order: number[] } {
  const order: number[] = [];
  let out = "";
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quote !== null) {
      out += ch;
      if (ch === quote) quote = null;
      continue;
    }
    if (ch === "'" || ch === '"') {
      quote = ch;
      out += ch;
      continue;
    }
    if (ch === "$" && /[0-9]/.test(text[i + 1] ?? "")) {
      let j = i + 1;
      while (j < text.length && /[0-9]/.test(text[j]!)) j++;
      order.push(Number(text.slice(i + 1, j)) - 1);
      out += "?";
      i = j - 1;
      continue;
    }
    out += ch;
  }
  return { text: out, order };
}

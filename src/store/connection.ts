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
  /** A reader's rows as objects (the statement itself reads arrays: see RowShape); null for a writer. */
  shape: RowShape | null;
}

/**
 * Builds a reader's rows as objects from the arrays better-sqlite3 reads in raw mode. Left to
 * make the objects itself, better-sqlite3 sets every value of every row by its column's name
 * (~0.4 µs a value): half the time of reading a run's row (16 runs' rows, 25 columns: 0.18 ms
 * against 0.09 ms read raw and built here), and as much again on every journal row. Here one
 * function per statement, made once from its column names, builds each row as one object
 * literal: one shape, the same keys in the same order as better-sqlite3's (a repeated name: the
 * last one wins, as there). A statement's columns are known when it is prepared; should another
 * process add columns meanwhile (a newer version's migration: a `SELECT *` grows), SQLite prepares
 * the statement again, and a row of another width makes the shape read its columns again.
 * Cairn's migrations only add columns, never rename or drop one, so a width is enough to tell; a
 * migration that renamed a column, or dropped one and added another, would keep the width and go
 * unseen by a process already running — such a change needs every executor restarted.
 */
export class RowShape {
  private width = -1;
  private build: (values: unknown[]) => Record<string, unknown> = () => ({});

  constructor(private readonly statement: Database.Statement) {
    statement.raw(true);
    this.learn();
  }

  rows<Row>(values: unknown[][]): Row[] {
    if (values.length > 0 && values[0]!.length !== this.width) this.learn();
    const rows = new Array<Row>(values.length);
    for (let i = 0; i < values.length; i++) rows[i] = this.build(values[i]!) as Row;
    return rows;
  }

  private learn(): void {
    const names = this.statement.columns().map((column) => column.name);
    this.build = literalBuilder(names) ?? loopBuilder(names);
    this.width = names.length;
  }
}

/** One object literal of the columns' names (a computed key for `__proto__`, which a literal would take as the prototype). */
function literalBuilder(names: string[]): ((values: unknown[]) => Record<string, unknown>) | null {
  const fields = names.map((name, i) => `${name === "__proto__" ? `[${JSON.stringify(name)}]` : JSON.stringify(name)}: v[${i}]`);
  try {
    return new Function("v", `return { ${fields.join(", ")} };`) as (values: unknown[]) => Record<string, unknown>;
  } catch {
    // Code generation from strings is off (node --disallow-code-generation-from-strings): slower, the same rows.
    return null;
  }
}

function loopBuilder(names: string[]): (values: unknown[]) => Record<string, unknown> {
  return (values) => {
    const row: Record<string, unknown> = {};
    for (let i = 0; i < names.length; i++)
      Object.defineProperty(row, names[i]!, { value: values[i], writable: true, enumerable: true, configurable: true });
    return row;
  };
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
      const statement = this.db.prepare(positional);
      compiled = { statement, order: inOrder ? null : order, shape: statement.reader ? new RowShape(statement) : null };
      this.cache.set(text, compiled);
    }
    return compiled;
  }

  all<Row>(text: string, params: readonly unknown[]): Row[] {
    const { statement, order, shape } = this.compiled(text);
    const bound = order === null ? params : order.map((i) => params[i]);
    if (shape === null) return (statement.run(...bound), []);
    return shape.rows<Row>(statement.all(...bound) as unknown[][]);
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

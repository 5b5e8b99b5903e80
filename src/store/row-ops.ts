import { InvalidSpecError } from "../errors.js";

/**
 * Row writes for the layers above the engine, on the tables each layer declared through the
 * extension contract (`extension.ts`). They commit in the same transaction as the step that makes
 * them, through the same `Store.commit`, so a layer's record of a step and the step are durable
 * together or not at all. The SQL is built here, once, in `$n` style for both backends.
 */
export type SqlValue = string | number | boolean | null;

export interface InsertOp {
  type: "insert";
  table: string;
  values: Record<string, SqlValue>;
  /** On a key conflict: keep the existing row ("ignore"), or overwrite the given values ("update"). */
  onConflict?: { keys: string[]; action: "ignore" | "update" };
}

export interface UpdateOp {
  type: "update";
  table: string;
  /** Equality on each column; an array value means "any of". */
  where: Record<string, SqlValue | SqlValue[]>;
  set?: Record<string, SqlValue>;
  /** Adds to numeric columns: `column = column + n`. */
  increment?: Record<string, number>;
}

export interface DeleteOp {
  type: "delete";
  table: string;
  /** Equality on each column; an array value means "any of". */
  where: Record<string, SqlValue | SqlValue[]>;
}

export type RowOp = InsertOp | UpdateOp | DeleteOp;

export interface BuiltSql {
  text: string;
  values: SqlValue[];
}

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

function ident(name: string, table: string): string {
  if (!IDENTIFIER.test(name)) throw new InvalidSpecError("column", name, `not a valid column of ${table}`);
  return name;
}

function checkTable(table: string, writable: ReadonlySet<string>): void {
  if (!writable.has(table)) {
    throw new InvalidSpecError("table", table, `row operations may write only ${[...writable].join(", ")}`);
  }
}

/** `writable`: the tables the registered layers declared (and cairn_payloads). */
export function buildRowOp(op: RowOp, writable: ReadonlySet<string>): BuiltSql {
  checkTable(op.table, writable);
  switch (op.type) {
    case "insert":
      return buildInsert(op);
    case "update":
      return buildUpdate(op);
    case "delete":
      return buildDelete(op);
  }
}

function buildInsert(op: InsertOp): BuiltSql {
  const columns = Object.keys(op.values).map((c) => ident(c, op.table));
  const values = columns.map((c) => op.values[c] ?? null);
  let text = `INSERT INTO ${op.table} (${columns.join(", ")}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(", ")})`;
  if (op.onConflict !== undefined) {
    const keys = op.onConflict.keys.map((k) => ident(k, op.table));
    const updates = columns.filter((c) => !keys.includes(c));
    text +=
      op.onConflict.action === "ignore" || updates.length === 0
        ? ` ON CONFLICT (${keys.join(", ")}) DO NOTHING`
        : ` ON CONFLICT (${keys.join(", ")}) DO UPDATE SET ${updates.map((c) => `${c} = excluded.${c}`).join(", ")}`;
  }
  return { text, values };
}

function buildUpdate(op: UpdateOp): BuiltSql {
  const values: SqlValue[] = [];
  const param = (value: SqlValue): string => {
    values.push(value);
    return `$${values.length}`;
  };
  const assignments = [
    ...Object.entries(op.set ?? {}).map(([c, v]) => `${ident(c, op.table)} = ${param(v)}`),
    ...Object.entries(op.increment ?? {}).map(([c, n]) => `${ident(c, op.table)} = ${ident(c, op.table)} + ${param(n)}`),
  ];
  if (assignments.length === 0) throw new InvalidSpecError("set", op.set, `an update of ${op.table} must change something`);
  const where = whereClause(op, param);
  return { text: `UPDATE ${op.table} SET ${assignments.join(", ")} WHERE ${where}`, values };
}

function buildDelete(op: DeleteOp): BuiltSql {
  const values: SqlValue[] = [];
  const where = whereClause(op, (value) => {
    values.push(value);
    return `$${values.length}`;
  });
  return { text: `DELETE FROM ${op.table} WHERE ${where}`, values };
}

function whereClause(op: UpdateOp | DeleteOp, param: (value: SqlValue) => string): string {
  const conditions = Object.entries(op.where).map(([c, v]) => {
    const column = ident(c, op.table);
    if (!Array.isArray(v)) return v === null ? `${column} IS NULL` : `${column} = ${param(v)}`;
    if (v.length === 0) return "1 = 0";
    return `${column} IN (${v.map(param).join(", ")})`;
  });
  if (conditions.length === 0) throw new InvalidSpecError("where", op.where, `a ${op.type} of ${op.table} needs a condition`);
  return conditions.join(" AND ");
}

import { buildRowOp, type BuiltSql, type InsertOp, type SqlValue } from "./row-ops.js";

/**
 * The prepared statements of the inserts the layers above repeat (a model call's row, a prompt
 * message's payload, ...), found again by the op's shape — its table, its columns in order, its
 * conflict clause — compared in place. Building an insert's SQL from its op (checking each column
 * name, joining the clauses) and then finding its statement by the text cost more than running it;
 * an op of a shape already seen does neither. The first op of each shape goes through `buildRowOp`,
 * so the table and column checks happen as before, once per shape.
 */
export class InsertShapes<S> {
  private readonly byTable = new Map<string, InsertShape<S>[]>();

  /** `prepare`: the backend's statement for the SQL `buildRowOp` wrote for a shape's first op. */
  constructor(private readonly prepare: (built: BuiltSql) => S) {}

  /** The statement for `op`'s shape, and `op`'s values in its column order. */
  statementFor(op: InsertOp, writable: ReadonlySet<string>): { statement: S; values: SqlValue[] } {
    let shapes = this.byTable.get(op.table);
    if (shapes !== undefined) {
      for (const shape of shapes) {
        if (shape.matches(op)) return { statement: shape.statement, values: shape.valuesOf(op) };
      }
    }
    const built = buildRowOp(op, writable);
    const shape = new InsertShape(Object.keys(op.values), op.onConflict, this.prepare(built));
    if (shapes === undefined) {
      shapes = [];
      this.byTable.set(op.table, shapes);
    }
    // A layer writes a handful of shapes per table; a bound keeps ops built with varying columns from growing it.
    if (shapes.length < MAX_SHAPES_PER_TABLE) shapes.push(shape);
    return { statement: shape.statement, values: built.values };
  }
}

const MAX_SHAPES_PER_TABLE = 16;

class InsertShape<S> {
  constructor(
    private readonly columns: readonly string[],
    private readonly onConflict: InsertOp["onConflict"],
    readonly statement: S,
  ) {}

  matches(op: InsertOp): boolean {
    const conflict = op.onConflict;
    if (conflict === undefined || this.onConflict === undefined) {
      if (conflict !== this.onConflict) return false;
    } else if (conflict.action !== this.onConflict.action || !sameStrings(conflict.keys, this.onConflict.keys)) {
      return false;
    }
    // for-in yields the own enumerable keys in Object.keys' order without allocating them; an
    // inherited enumerable key (none on a literal) makes a mismatch, and the op takes the slow path.
    let i = 0;
    for (const key in op.values) {
      if (key !== this.columns[i]) return false;
      i++;
    }
    return i === this.columns.length;
  }

  /** As `buildRowOp` orders them (an undefined value binds as null). */
  valuesOf(op: InsertOp): SqlValue[] {
    const values: SqlValue[] = new Array(this.columns.length);
    for (let i = 0; i < this.columns.length; i++) values[i] = op.values[this.columns[i]!] ?? null;
    return values;
  }
}

function sameStrings(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

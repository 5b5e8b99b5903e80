import Database from "better-sqlite3";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { SqliteStatements } from "../../src/store/connection.js";
import { scratchDir } from "../scratch.js";

/**
 * SQLite reads rows as arrays and builds the objects itself (connection.ts, RowShape). The objects
 * must be exactly better-sqlite3's own (the same keys in the same order, a repeated name's last
 * value), but that a column named `__proto__` is a plain key — and a statement whose columns change under
 * it (another connection adds one: `SELECT *` grows) must read the new columns, not old names.
 */
describe("SQLite rows built from arrays", () => {
  const opened: Database.Database[] = [];
  afterEach(() => {
    for (const db of opened.splice(0)) db.close();
  });

  function open(): { db: Database.Database; path: string } {
    const path = join(scratchDir("row-shape-"), "rows.db");
    const db = new Database(path);
    opened.push(db);
    db.exec("CREATE TABLE t (id TEXT PRIMARY KEY, a INTEGER, b TEXT); INSERT INTO t VALUES ('x', 1, 'one'), ('y', 2, NULL)");
    return { db, path };
  }

  it("are the objects better-sqlite3 builds, key for key", () => {
    const { db } = open();
    const statements = new SqliteStatements(db);
    const texts = [
      "SELECT * FROM t ORDER BY id",
      'SELECT t.*, t.a + 1 AS a, b AS "we""ird" FROM t WHERE id = $1',
      "SELECT count(*) AS n FROM t WHERE a > $1",
      "SELECT id FROM t WHERE id = 'none'",
      "SELECT id, 1, 'z' AS \"2\" FROM t ORDER BY id",
    ];
    const params = [[], ["y"], [0], [], []];
    texts.forEach((text, i) => {
      const expected = db.prepare(text.replace("$1", "?")).all(...params[i]!);
      const got = statements.all<Record<string, unknown>>(text, params[i]!);
      expect(got).toEqual(expected);
      got.forEach((row, k) => expect(Object.keys(row)).toEqual(Object.keys(expected[k] as object)));
    });
    expect(statements.all<Record<string, unknown>>(texts[1]!, ["y"])[0]!.a).toBe(3);
  });

  it("keep a column named __proto__ as an own value, never the row's prototype", () => {
    const { db } = open();
    const row = new SqliteStatements(db).all<Record<string, unknown>>("SELECT id, 'p' AS __proto__ FROM t WHERE id = $1", ["x"])[0]!;
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(row, "__proto__")?.value).toBe("p");
    expect(Object.keys(row)).toEqual(["id", "__proto__"]);
  });

  it("follow a statement whose columns another connection added", () => {
    const { db, path } = open();
    const statements = new SqliteStatements(db);
    const text = "SELECT *, 'end' AS tail FROM t WHERE id = $1";
    expect(statements.all(text, ["x"])).toEqual([{ id: "x", a: 1, b: "one", tail: "end" }]);
    const other = new Database(path);
    other.exec("ALTER TABLE t ADD COLUMN c TEXT DEFAULT 'new'");
    other.close();
    expect(statements.all(text, ["x"])).toEqual([{ id: "x", a: 1, b: "one", c: "new", tail: "end" }]);
  });
});

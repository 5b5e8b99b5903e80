import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { StatementClient } from "../../src/store/postgres/statement-client.js";
import { arrayLiteral } from "../../src/store/postgres/array-literal.js";

// PostgreSQL only: the client class the store's pool is made with (statement-client.ts).
const postgres = BACKENDS.find((backend) => backend.name === "postgres");

describe.skipIf(postgres === undefined)("StatementClient (PostgreSQL)", () => {
  let pool: pg.Pool;

  beforeAll(async () => {
    pool = new pg.Pool({ Client: StatementClient, connectionString: await postgres!.freshDatabase(), max: 2 });
    await pool.query("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)");
  });

  afterAll(async () => {
    await pool.end();
  });

  it("sends a named statement once prepared, and its values each time, on a held client and through the pool", async () => {
    const client = await pool.connect();
    try {
      for (const id of [1, 2, 3]) {
        const inserted = await client.query({
          name: "t_insert",
          text: "INSERT INTO t (id, body) VALUES ($1, $2) RETURNING id, body",
          values: [id, `b${id}`],
        });
        expect(inserted.rows).toEqual([{ id, body: `b${id}` }]);
        expect(inserted.rowCount).toBe(1);
      }
      // Prepared in this session under its name: the server lists it.
      const prepared = await client.query({ text: "SELECT name FROM pg_prepared_statements WHERE name = $1", values: ["t_insert"] });
      expect(prepared.rows).toEqual([{ name: "t_insert" }]);
      // Values given beside the config, as pg allows.
      const read = await client.query({ name: "t_read", text: "SELECT body FROM t WHERE id = $1" }, [2]);
      expect(read.rows).toEqual([{ body: "b2" }]);
    } finally {
      client.release();
    }
    // pool.query passes a callback to its client: the plain path takes that style too.
    const counted = await pool.query({ name: "t_count", text: "SELECT count(*)::int AS n FROM t WHERE id > $1", values: [0] });
    expect(counted.rows).toEqual([{ n: 3 }]);
  });

  it("rejects with the server's error, SQLSTATE and all, and the connection goes on", async () => {
    const client = await pool.connect();
    try {
      const failing = client.query({ name: "t_insert_again", text: "INSERT INTO t (id, body) VALUES ($1, $2)", values: [1, "again"] });
      await expect(failing).rejects.toMatchObject({ code: "23505", constraint: "t_pkey" });
      await expect(failing).rejects.toBeInstanceOf(Error);
      const still = await client.query({ name: "t_read", text: "SELECT body FROM t WHERE id = $1", values: [1] });
      expect(still.rows).toEqual([{ body: "b1" }]);
    } finally {
      client.release();
    }
  });

  it("sends arrays of strings, numbers, booleans and nulls as literals that read back the same", async () => {
    const texts = [
      "run-1",
      "7f1c2b9e-8a51-4c1e-9d0e-3f2a1b4c5d6e",
      "",
      "NULL",
      "null",
      " padded ",
      'a "quoted" word',
      "back\\slash\\",
      "{braces},commas",
      "tab\tnew\nline",
      "ünïcödé ✓",
      '{"json":[1,2],"s":"x\\"y"}',
      "1e+21",
      null,
      undefined,
    ];
    const read = await pool.query({ name: "t_texts", text: "SELECT v FROM unnest($1::text[]) WITH ORDINALITY AS u(v, i) ORDER BY i", values: [texts] });
    expect(read.rows.map((r: { v: string | null }) => r.v)).toEqual(texts.map((t) => t ?? null));
    const numbers = [0, -5, 2147483647, null, 42];
    const ints = await pool.query({ name: "t_ints", text: "SELECT v FROM unnest($1::int[]) WITH ORDINALITY AS u(v, i) ORDER BY i", values: [numbers] });
    expect(ints.rows.map((r: { v: number | null }) => r.v)).toEqual(numbers);
    const big = [Date.now(), -1, 9007199254740991];
    const bigints = await pool.query({
      name: "t_bigints",
      text: "SELECT v::text AS v FROM unnest($1::bigint[]) WITH ORDINALITY AS u(v, i) ORDER BY i",
      values: [big],
    });
    expect(bigints.rows.map((r: { v: string }) => r.v)).toEqual(big.map(String));
    const flags = await pool.query({
      name: "t_flags",
      text: "SELECT v FROM unnest($1::boolean[]) WITH ORDINALITY AS u(v, i) ORDER BY i",
      values: [[true, false, null]],
    });
    expect(flags.rows.map((r: { v: boolean | null }) => r.v)).toEqual([true, false, null]);
    const empty = await pool.query({ name: "t_empty", text: "SELECT cardinality($1::text[]) AS n", values: [[]] });
    expect(empty.rows).toEqual([{ n: 0 }]);
  });

  it("leaves arrays it does not make to pg: nested, of dates, of objects", async () => {
    expect(arrayLiteral(["a", 1, null])).toBe("{a,1,NULL}");
    expect(arrayLiteral([[1, 2]])).toBeNull();
    expect(arrayLiteral([new Date(0)])).toBeNull();
    expect(arrayLiteral([{ a: 1 }])).toBeNull();
    const nested = await pool.query({
      name: "t_nested",
      text: "SELECT $1::int[] AS v",
      values: [
        [
          [1, 2],
          [3, 4],
        ],
      ],
    });
    expect(nested.rows).toEqual([
      {
        v: [
          [1, 2],
          [3, 4],
        ],
      },
    ]);
  });

  it("leaves any other config to pg: row mode, a string with values, a callback", async () => {
    const arrays = await pool.query({ text: "SELECT id, body FROM t WHERE id = $1", values: [3], rowMode: "array" });
    expect(arrays.rows).toEqual([[3, "b3"]]);
    const text = await pool.query("SELECT body FROM t WHERE id = $1", [1]);
    expect(text.rows).toEqual([{ body: "b1" }]);
    const client = await pool.connect();
    try {
      const viaCallback = await new Promise<pg.QueryResult>((resolve, reject) =>
        client.query({ text: "SELECT count(*)::int AS n FROM t", values: [] }, (error: Error | undefined, result: pg.QueryResult) =>
          error ? reject(error) : resolve(result),
        ),
      );
      expect(viaCallback.rows).toEqual([{ n: 3 }]);
    } finally {
      client.release();
    }
  });
});

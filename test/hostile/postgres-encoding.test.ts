import pg from "pg";
import { describe, expect, it } from "vitest";
import { InvalidSpecError } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { scratchDatabaseName } from "../scratch.js";

// PostgreSQL only: a database's encoding is chosen when it is created.
const postgres = BACKENDS.find((backend) => backend.name === "postgres");

describe.skipIf(postgres === undefined)("a PostgreSQL database in an encoding other than UTF8", () => {
  const env = cairnFactory(postgres!);

  it("is refused at launch with what to do, and left as it was (before, every run with a character LATIN1 lacks failed)", async () => {
    const server = new URL(process.env.CAIRN_TEST_POSTGRES_URL!);
    const name = scratchDatabaseName();
    const admin = new pg.Client({ connectionString: server.toString() });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE ${name} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`);
    } finally {
      await admin.end();
    }
    const db = new URL(server);
    db.pathname = `/${name}`;
    const cairn = env.cairn(db.toString());
    const error = await cairn.launch().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidSpecError);
    expect((error as Error).message).toMatch(/encoding is LATIN1.*ENCODING 'UTF8'/);
    const client = new pg.Client({ connectionString: db.toString() });
    await client.connect();
    try {
      const { rows } = await client.query("SELECT count(*)::int AS n FROM pg_tables WHERE tablename LIKE 'cairn%'");
      expect(rows[0].n).toBe(0);
    } finally {
      await client.end();
    }
  });
});

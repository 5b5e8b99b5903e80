import Database from "better-sqlite3";
import { copyFileSync, existsSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Cairn } from "../../src/index.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { presizeWal } from "../../src/store/sqlite/wal-presize.js";
import { scratchDir } from "../scratch.js";

// src/store/sqlite/wal-presize.ts: a SQLite store whose commits fsync writes its WAL file out to
// its working size when it opens, so commits write into blocks the file has instead of growing it.
const FRAME = 4096 + 24;
const WORKING_SIZE = 32 + 1250 * FRAME; // wal_autocheckpoint (1,000 pages) x 1.25

describe("the SQLite WAL written out to its working size", () => {
  const open: Cairn[] = [];
  afterEach(async () => {
    for (const cairn of open.splice(0)) await cairn.shutdown();
  });

  async function launched(database: string, options: { synchronous?: "NORMAL" } = {}) {
    const cairn = new Cairn({ database, ...options });
    open.push(cairn);
    const steps = cairn.workflow("steps", async (ctx, count: number) => {
      let total = 0;
      for (let i = 0; i < count; i++) total += await ctx.step(`step-${i}`, () => i);
      return total;
    });
    await cairn.launch();
    return { cairn, steps };
  }

  function read<Row>(database: string, sql: string): Row {
    const reader = new Database(database, { readonly: true });
    try {
      return reader.prepare(sql).get() as Row;
    } finally {
      reader.close();
    }
  }

  /** What a crash leaves on disk: the database and its WAL copied as they are, to a folder of their own. */
  function crashImage(database: string): string {
    const image = join(scratchDir("wal-presize-image-"), "cairn.db");
    copyFileSync(database, image);
    copyFileSync(`${database}-wal`, `${image}-wal`);
    return image;
  }

  it("is written when the store opens, and commits land inside it", async () => {
    const database = join(scratchDir("wal-presize-"), "cairn.db");
    const { steps } = await launched(database);
    expect(statSync(`${database}-wal`).size).toBe(WORKING_SIZE);
    expect(await (await steps.start(40, { id: "forty" })).result()).toBe(780);
    expect(statSync(`${database}-wal`).size).toBe(WORKING_SIZE);

    // What a crash leaves: the database and its WAL as they are on disk (every commit fsynced),
    // opened by a connection that never saw the store. Recovery must read the frames written and
    // stop at the zeros after them.
    const image = crashImage(database);
    expect(read<{ n: number }>(image, "SELECT count(*) AS n FROM cairn_steps WHERE run_id = 'forty' AND kind = 'step'").n).toBe(40);
    expect(read<{ status: string }>(image, "SELECT status FROM cairn_runs WHERE id = 'forty'").status).toBe("succeeded");
    expect(read<{ integrity_check: string }>(image, "PRAGMA integrity_check").integrity_check).toBe("ok");
  });

  it("is written again by the next store that opens the file, after the last close removed it", async () => {
    const database = join(scratchDir("wal-presize-"), "cairn.db");
    const first = await launched(database);
    expect(await (await first.steps.start(5, { id: "first" })).result()).toBe(10);
    await first.cairn.shutdown();
    // The last connection closed: SQLite checkpointed the WAL into the file and removed it.
    expect(existsSync(`${database}-wal`)).toBe(false);
    const second = await launched(database);
    expect(statSync(`${database}-wal`).size).toBe(WORKING_SIZE);
    expect(await (await second.steps.start(3, { id: "second" })).result()).toBe(3);
    await second.cairn.shutdown();
    expect(read<{ n: number }>(database, "SELECT count(*) AS n FROM cairn_runs WHERE status = 'succeeded'").n).toBe(2);
  });

  it("takes a WAL of zeros alone (a store that wrote it out and died before its first commit) for an empty one", async () => {
    const database = join(scratchDir("wal-presize-"), "cairn.db");
    const first = await launched(database);
    expect(await (await first.steps.start(5, { id: "first" })).result()).toBe(10);
    await first.cairn.shutdown();
    writeFileSync(`${database}-wal`, Buffer.alloc(WORKING_SIZE));
    const second = await launched(database);
    expect(await (await second.steps.start(3, { id: "second" })).result()).toBe(3);
    await second.cairn.shutdown();
    expect(read<{ n: number }>(database, "SELECT count(*) AS n FROM cairn_runs WHERE status = 'succeeded'").n).toBe(2);
    expect(read<{ integrity_check: string }>(database, "PRAGMA integrity_check").integrity_check).toBe("ok");
  });

  it("appends after frames another connection committed and still holds, and a crash image keeps them all", async () => {
    const database = join(scratchDir("wal-presize-"), "cairn.db");
    const first = await launched(database, { synchronous: "NORMAL" });
    expect(await (await first.steps.start(4, { id: "before" })).result()).toBe(6);
    // A connection kept open keeps the WAL (and its committed frames) from being removed.
    const holder = new Database(database);
    try {
      holder.pragma("wal_autocheckpoint = 0");
      holder.exec("CREATE TABLE outside (k TEXT PRIMARY KEY)");
      holder.prepare("INSERT INTO outside VALUES (?)").run("committed before the zeros");
      await first.cairn.shutdown();
      const live = statSync(`${database}-wal`).size;
      expect(live).toBeGreaterThan(0);
      expect(live).toBeLessThan(WORKING_SIZE);
      const second = await launched(database);
      expect(statSync(`${database}-wal`).size).toBe(WORKING_SIZE);
      expect(await (await second.steps.start(3, { id: "after" })).result()).toBe(3);
      const image = crashImage(database);
      expect(read<{ n: number }>(image, "SELECT count(*) AS n FROM cairn_runs WHERE status = 'succeeded'").n).toBe(2);
      expect(read<{ k: string }>(image, "SELECT k FROM outside").k).toBe("committed before the zeros");
      expect(read<{ integrity_check: string }>(image, "PRAGMA integrity_check").integrity_check).toBe("ok");
    } finally {
      holder.close();
    }
  });

  it("opens, without writing it out, when another process holds the write lock past busy_timeout", async () => {
    const database = join(scratchDir("wal-presize-"), "cairn.db");
    const first = await launched(database, { synchronous: "NORMAL" });
    await first.cairn.shutdown();
    const holder = new Database(database);
    try {
      holder.pragma("journal_mode = WAL");
      holder.exec("BEGIN IMMEDIATE"); // the write lock, held; this connection's own busy wait is the store's
      const store = new SqliteStore(database);
      try {
        store["db"].pragma("busy_timeout = 50");
        presizeWal(store["db"]);
        expect(statSync(`${database}-wal`).size).toBeLessThan(WORKING_SIZE);
        expect(store["db"].inTransaction).toBe(false);
      } finally {
        await store.close();
      }
    } finally {
      holder.close();
    }
  });

  it("is not written for a store whose commits do not fsync", async () => {
    const database = join(scratchDir("wal-presize-"), "cairn.db");
    const { steps } = await launched(database, { synchronous: "NORMAL" });
    expect(await (await steps.start(3, { id: "normal" })).result()).toBe(3);
    expect(statSync(`${database}-wal`).size).toBeLessThan(WORKING_SIZE / 10);
  });
});

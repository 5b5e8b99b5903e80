import Database from "better-sqlite3";
import { parseArgs } from "node:util";
import { presizeWal } from "../internal.js";
import { scratchSqlite } from "./scratch-databases.js";
import { median } from "./stats.js";

/**
 * `npm run build:tools && node .tmp/tools/tools/bench/wal-growth.js [--commits 200] [--rounds 3]`:
 * what an fsync'd SQLite commit costs when it grows the WAL file, against one that writes into
 * blocks the file already has — the measurement behind src/store/sqlite/wal-presize.ts.
 *
 * Each arm is a fresh file in WAL mode with synchronous=FULL, committing `--commits` transactions
 * of two rows (a 3 KB blob each, in two tables with text primary keys: a few pages, as a step or a
 * model call's record writes). "growing": the WAL starts empty and every commit appends to it.
 * "written out": `presizeWal` first, as Cairn's store does when it opens. "reused": the WAL after a
 * checkpoint that restarted it, as SQLite reuses it in a long-lived process (the arm the
 * written-out one should match). Printed: µs per commit, p50 and mean, medians over rounds.
 */
type Arm = "growing" | "written out" | "reused";

function commitTimes(arm: Arm, commits: number): number[] {
  const scratch = scratchSqlite();
  const db = new Database(scratch.database);
  try {
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = FULL");
    db.exec("CREATE TABLE a (id TEXT PRIMARY KEY, v BLOB); CREATE TABLE b (id TEXT PRIMARY KEY, h TEXT UNIQUE, v BLOB)");
    const insertA = db.prepare("INSERT INTO a VALUES (?, ?)");
    const insertB = db.prepare("INSERT INTO b VALUES (?, ?, ?)");
    const blob = Buffer.alloc(3000, 7);
    let n = 0;
    const commit = db.transaction(() => {
      n++;
      insertA.run(`a-${n}`, blob);
      insertB.run(`b-${n}`, `h-${n}`, blob);
    });
    if (arm === "written out") presizeWal(db);
    if (arm === "reused") {
      for (let i = 0; i < commits; i++) commit.immediate();
      db.pragma("wal_checkpoint(RESTART)");
    }
    const times: number[] = [];
    for (let i = 0; i < commits; i++) {
      const t0 = performance.now();
      commit.immediate();
      times.push((performance.now() - t0) * 1000);
    }
    return times;
  } finally {
    db.close();
    void scratch.dispose();
  }
}

function main(): void {
  const { values } = parseArgs({ options: { commits: { type: "string", default: "200" }, rounds: { type: "string", default: "3" } } });
  const commits = Number(values.commits);
  const arms: Arm[] = ["growing", "written out", "reused"];
  const p50s = new Map<Arm, number[]>(arms.map((arm) => [arm, []]));
  const means = new Map<Arm, number[]>(arms.map((arm) => [arm, []]));
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const arm of arms) {
      const times = commitTimes(arm, commits);
      p50s.get(arm)!.push(median(times) ?? 0);
      means.get(arm)!.push(times.reduce((a, b) => a + b, 0) / times.length);
    }
  }
  console.log(`fsync'd SQLite commits of two 3 KB rows, ${commits} a round, medians of ${values.rounds} rounds`);
  for (const arm of arms) {
    console.log(
      `  ${arm.padEnd(12)} p50 ${median(p50s.get(arm)!)!.toFixed(0).padStart(5)} µs   mean ${median(means.get(arm)!)!.toFixed(0).padStart(5)} µs`,
    );
  }
  const growing = median(p50s.get("growing")!)!;
  console.log(`growing ÷ written out (p50): ${(growing / median(p50s.get("written out")!)!).toFixed(2)}×`);
}

main();

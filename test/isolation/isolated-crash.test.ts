import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { storeOf } from "../../src/internal.js";
import { BACKENDS } from "../backends.js";
import { Worker } from "../crash/crash-harness.js";
import { cairnFactory, eventually } from "../harness.js";
import { scratchDir } from "../scratch.js";
import { alive, poolProcesses } from "./pool-processes.js";

/**
 * The executor running an isolated step is SIGKILLed: its pool process does not outlive it (even one
 * stuck in an infinite loop, which never hears its channel close), and the isolated step that had
 * returned before the kill is journaled — the next executor replays it and never runs it again.
 */

const WORKER = fileURLToPath(new URL("./fixtures/isolation-worker.mjs", import.meta.url));

describe.each(BACKENDS)("an executor SIGKILLed during isolated steps on $name", (backend) => {
  const env = cairnFactory(backend);
  const alive_: Worker[] = [];
  afterEach(async () => {
    await Promise.all(alive_.splice(0).map((w) => w.kill()));
  });
  const start = (db: string, ledger: string, mode: "hang" | "finish"): Worker => {
    const child = spawn(process.execPath, [WORKER], { env: { ...process.env, DB: db, LEDGER: ledger, MODE: mode }, stdio: ["ignore", "pipe", "pipe"] });
    const worker = new Worker(child);
    alive_.push(worker);
    return worker;
  };

  it("leaves no pool process behind, and the journaled isolated step is not run again", async () => {
    const db = await env.database();
    const ledger = `${scratchDir("cairn-isolation-")}/ledger.txt`;

    const first = start(db, ledger, "hang");
    const poolPid = Number((await first.line(/^first (\d+)$/))[1]);
    await first.line(/^hang$/);
    // The second step is looping in the very process the first ran in (a pool of one, kept warm).
    expect(poolProcesses(first.pid)).toEqual([poolPid]);
    await first.kill();
    await eventually(() => !alive(poolPid), 5_000);

    const second = start(db, ledger, "finish");
    expect((await second.line(/^result (\w+) (.*)$/, 20_000)).slice(1)).toEqual(["succeeded", JSON.stringify({ firstPid: poolPid, second: 4 })]);
    await second.exited;
    expect(readFileSync(ledger, "utf8").trim().split("\n")).toEqual([`first iso:0 ${poolPid}`]);

    const journal = await storeOf(env.cairn(db)).loadJournal("iso");
    expect(journal.map((row) => [row.seq, row.name, row.status])).toEqual([
      [0, "first", "succeeded"],
      [1, "second", "succeeded"],
    ]);
  });
});

import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { readLedger, tally, workerFactory } from "./crash-harness.js";
import { storeOf } from "../../src/internal.js";

describe.each(BACKENDS)("SIGKILL during durable waits on $name", (backend) => {
  const env = cairnFactory(backend);
  const workers = workerFactory();

  it("killed while sleeping: the restart sleeps only the remainder, and nothing before the sleep runs again", async () => {
    // Long enough that the remainder (at most half of it) plus a restart under a loaded machine's
    // delays stays far below a whole nap: at 500 ms a slow claim and replay crossed the line.
    const napMs = 2_000;
    const db = await env.database();
    const ledger = workers.ledger();
    const first = workers.spawn({ database: db, ledger, start: [{ workflow: "sleeper", id: "nap", input: { napMs } }] });
    await first.line(/^done nap 0$/);
    const observer = env.cairn(db);
    await eventually(async () => (await observer.run("nap").status()).status === "waiting", 5_000);
    await first.kill();

    const sleep = (await storeOf(observer).loadJournal("nap"))[1]!;
    expect([sleep.kind, sleep.name, sleep.status]).toEqual(["sleep", "nap", "succeeded"]);
    const wakeAt = JSON.parse(sleep.output!) as number;
    expect(wakeAt - sleep.startedAt).toBeGreaterThanOrEqual(napMs - 5);
    expect(wakeAt - sleep.startedAt).toBeLessThanOrEqual(napMs + 5);
    // Restart halfway through the sleep, so that sleeping the remainder and sleeping all over again
    // are far apart (a purposeful wait for a recorded time, not a guess at one).
    const midway = wakeAt - napMs / 2 - Date.now();
    if (midway > 0) await new Promise((resolve) => setTimeout(resolve, midway));

    const second = workers.spawn({ database: db, ledger, await: ["nap"] });
    expect(await second.result("nap")).toEqual({ status: "succeeded", value: "slept" });
    const bootAt = await second.time("boot");
    await second.finished();

    const journal = await storeOf(observer).loadJournal("nap");
    expect(journal.map((row) => [row.seq, row.kind, row.name])).toEqual([
      [0, "step", "before"],
      [1, "sleep", "nap"],
      [2, "step", "after"],
    ]);
    expect(JSON.parse(journal[1]!.output!)).toBe(wakeAt);
    const after = journal[2]!.startedAt;
    expect(after).toBeGreaterThanOrEqual(wakeAt);
    // A sleep begun again from scratch could not end before bootAt + napMs.
    expect(after).toBeLessThan(bootAt + napMs);

    const entries = readLedger(ledger);
    const done = tally(entries, "done");
    expect([done.get("nap 0"), done.get("nap 2")]).toEqual([1, 1]);
    expect(entries.filter((e) => e.kind === "done").map((e) => e.pid)).toEqual([first.pid, second.pid]);
  });

  it("killed while waiting for a message: the message sent meanwhile is received exactly once", async () => {
    const db = await env.database();
    const ledger = workers.ledger();
    const first = workers.spawn({ database: db, ledger, start: [{ workflow: "inbox", id: "mbox", input: { secondWaitMs: 300 } }] });
    await first.line(/^done mbox 0$/);
    const sender = env.cairn(db);
    await eventually(async () => (await sender.run("mbox").status()).status === "waiting", 5_000);
    await first.kill();

    // A separate Cairn, never launched, sends; the second send repeats the first's key.
    await sender.send("mbox", "go", { n: 1 }, { idempotencyKey: "go-1" });
    await sender.send("mbox", "go", { n: 1 }, { idempotencyKey: "go-1" });
    const messages = () => storeOf(sender).query("SELECT id, consumed_by FROM cairn_messages WHERE run_id = 'mbox' ORDER BY id");
    expect((await messages()).rows).toEqual([{ id: 'send:["mbox","go-1"]', consumed_by: null }]);

    const second = workers.spawn({ database: db, ledger, await: ["mbox"] });
    await second.line(/^done mbox 2$/);
    // Once more while the run waits on its second receive: still the same message, not a new one.
    await sender.send("mbox", "go", { n: 1 }, { idempotencyKey: "go-1" });
    expect(await second.result("mbox")).toEqual({ status: "succeeded", value: { got: { n: 1 }, again: "none" } });
    await second.finished();

    expect((await messages()).rows).toEqual([{ id: 'send:["mbox","go-1"]', consumed_by: "mbox:1" }]);
    const entries = readLedger(ledger);
    const done = tally(entries, "done");
    expect([done.get("mbox 0"), done.get("mbox 2")]).toEqual([1, 1]);
    expect(entries.find((e) => e.kind === "done" && e.seq === 2)!.note).toBe('{"n":1}');
    const journal = await storeOf(sender).loadJournal("mbox");
    expect(journal.map((row) => [row.seq, row.kind, row.status])).toEqual([
      [0, "step", "succeeded"],
      [1, "recv", "succeeded"],
      [2, "step", "succeeded"],
      [3, "recv", "succeeded"],
    ]);
  });

  it("killed inside a child run: parent and child both finish and the child's result reaches the parent", async () => {
    const db = await env.database();
    const ledger = workers.ledger();
    const first = workers.spawn({
      database: db,
      ledger,
      start: [{ workflow: "parent", id: "fam", input: { childSteps: 6 } }],
      hang: ["inside@fam:1@3"],
    });
    await first.line(/^hang inside fam:1 3$/);
    await first.kill();

    const second = workers.spawn({ database: db, ledger, await: ["fam"] });
    expect(await second.result("fam")).toEqual({ status: "succeeded", value: { childId: "fam:1", child: { n: 6, sum: 55 } } });
    await second.finished();

    const observer = env.cairn(db);
    const child = (await storeOf(observer).getRun("fam:1"))!;
    expect([child.status, child.parentId, child.parentSeq]).toEqual(["succeeded", "fam", 1]);
    expect((await storeOf(observer).loadJournal("fam")).map((row) => [row.seq, row.kind])).toEqual([
      [0, "step"],
      [1, "child"],
      [2, "child-result"],
      [3, "step"],
    ]);
    const entries = readLedger(ledger);
    const done = tally(entries, "done");
    expect([done.get("fam 0"), done.get("fam 3")]).toEqual([1, 1]);
    expect([0, 1, 2, 4, 5].map((seq) => done.get(`fam:1 ${seq}`))).toEqual([1, 1, 1, 1, 1]);
    const again = entries.filter((e) => e.kind === "done" && e.runId === "fam:1" && e.seq === 3);
    expect(again.map((e) => [e.pid, e.key])).toEqual([
      [first.pid, "fam:1:3"],
      [second.pid, "fam:1:3"],
    ]);
    const runs = await storeOf(observer).query("SELECT COUNT(*) AS n FROM cairn_runs WHERE root_id = 'fam'");
    expect(Number(runs.rows[0]!.n)).toBe(2);
  });
});

import { describe, expect, it } from "vitest";
import { Cairn } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { selectWorkers } from "../supervision/crash-harness.js";

/**
 * ctx.select through SIGKILLs of its worker process (the built package, test/supervision/fixtures):
 * killed after a branch became ready but before the winner was recorded, and killed right after
 * the record — when another, earlier-listed branch becomes ready before the run is recovered.
 */
describe.each(BACKENDS)("ctx.select through a SIGKILL on $name", (backend) => {
  const env = cairnFactory(backend);
  const spawnWorker = selectWorkers();

  async function selects(cairn: Cairn): Promise<unknown[]> {
    return (await cairn.query("SELECT status, output FROM cairn_steps WHERE run_id = 'c' AND kind = 'select' ORDER BY seq")).rows;
  }

  it("killed between the event and its record: the recovered run records that winner once, and the child ran once", async () => {
    const database = await env.database();
    const first = spawnWorker({ database, start: [{ workflow: "chooser", id: "c" }], hang: "ready@pick", stay: true });
    expect((await first.line(/^hang ready c (\S+)$/, 20_000))[1]).toBe("1");
    await first.kill();
    const second = spawnWorker({ database, await: ["c"] });
    expect(await second.result("c", 20_000)).toEqual({ status: "succeeded", value: { key: 1, kind: "child" } });
    await second.finished();
    const cairn = env.cairn(database);
    const rows = (await selects(cairn)) as { status: string }[];
    expect(rows.map((r) => r.status)).toEqual(["succeeded"]);
    const kids = await cairn.query("SELECT id FROM cairn_runs WHERE parent_id = 'c'");
    expect(kids.rows.map((r) => r.id)).toEqual(["chooser/kid"]);
  }, 60_000);

  it("killed right after the record: replay returns the recorded winner although an earlier branch is ready by then", async () => {
    const database = await env.database();
    const first = spawnWorker({ database, start: [{ workflow: "chooser", id: "c" }], hang: "recorded@pick", stay: true });
    expect((await first.line(/^hang recorded c (\S+)$/, 20_000))[1]).toBe("1");
    await first.kill();
    // Branch 0 (listed first) is ready now: a fresh look would pick it; the record says 1.
    const outside = env.cairn(database);
    await outside.send("c", "early", "too late");
    const second = spawnWorker({ database, await: ["c"] });
    expect(await second.result("c", 20_000)).toEqual({ status: "succeeded", value: { key: 1, kind: "child" } });
    await second.finished();
    const unread = await outside.query("SELECT count(*) AS n FROM cairn_messages WHERE run_id = 'c' AND consumed_at IS NULL");
    expect(Number(unread.rows[0]!.n)).toBe(1);
  }, 60_000);
});

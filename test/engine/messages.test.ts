import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { storeOf } from "../../src/internal.js";

describe.each(BACKENDS)("messages and events on $name", (backend) => {
  const env = cairnFactory(backend);

  it("delivers each message exactly once, in order, between runs and from outside", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const inbox = cairn.workflow("inbox", async (ctx) => {
      const first = await ctx.recv<string>("greeting");
      const second = await ctx.recv<string>("greeting");
      await ctx.setEvent("progress", "got two");
      return [first, second];
    });
    const sender = cairn.workflow("sender", async (ctx, to: string) => {
      await ctx.send(to, "greeting", "hello");
      await ctx.send(to, "greeting", "again");
    });
    await cairn.launch();
    const receiver = await inbox.start(undefined, { id: "inbox" });
    await eventually(async () => (await receiver.status()).status === "waiting");
    await (await sender.start("inbox", { id: "sender" })).result();
    expect(await receiver.result()).toEqual(["hello", "again"]);
    expect(await cairn.getEvent("inbox", "progress", { timeoutMs: 1000 })).toBe("got two");

    const late = await inbox.start(undefined, { id: "outside" });
    await cairn.send("outside", "greeting", "one", { idempotencyKey: "k1" });
    await cairn.send("outside", "greeting", "one", { idempotencyKey: "k1" });
    await cairn.send("outside", "greeting", "two");
    expect(await late.result()).toEqual(["one", "two"]);
    const rows = await storeOf(cairn).query("SELECT count(*) AS n FROM cairn_messages WHERE run_id = 'outside'");
    expect(Number(rows.rows[0]!.n)).toBe(2);
  });

  it("times out a receive at the deadline recorded when the wait began", async () => {
    const clock = new ManualClock();
    const db = await env.database();
    const cairn = env.cairn(db, { clock });
    const wf = cairn.workflow("patient", async (ctx) => ctx.recv("reply", { timeoutMs: 10_000 }));
    await cairn.launch();
    const run = await wf.start(undefined, { id: "patient" });
    await eventually(async () => (await run.status()).status === "waiting");
    clock.advance(10_000);
    expect(await run.result()).toBeUndefined();
  });

  it("returns nothing from getEvent before the timeout when no one sets it", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    cairn.workflow("quiet", async () => "done");
    await cairn.launch();
    expect(await cairn.getEvent("nobody", "k", { timeoutMs: 50 })).toBeUndefined();
  });
});

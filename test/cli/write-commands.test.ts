import { describe, expect, it } from "vitest";
import { CancelledError } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { cli, expectOk, expectOneLineError } from "./cli.js";
import { storeOf } from "../../src/internal.js";

/**
 * The CLI is a client: its Cairn is never launched. The Cairn launched here, in the test process,
 * is the executor that must pick up what the CLI wrote.
 */
describe.each(BACKENDS)("cairn cancel/resume/fork/send on $name", (backend) => {
  const env = cairnFactory(backend);

  async function approvals() {
    const db = await env.database();
    const cairn = env.cairn(db, { pollIntervalMs: 50 });
    const acted: string[] = [];
    const wf = cairn.workflow("approval", async (ctx, order: string) => {
      const decision = await ctx.recv<{ approved: boolean }>("decision");
      await ctx.step("act", () => acted.push(order));
      return decision;
    });
    await cairn.launch();
    return { db, cairn, wf, acted };
  }

  it("sends a message a waiting run receives, once per idempotency key", async () => {
    const { db, cairn, wf, acted } = await approvals();
    const run = await wf.start("o1", { id: "r1" });
    await eventually(async () => (await run.status()).status === "waiting");

    const sent = await cli(["send", "r1", "decision", '{"approved": true}', "--key", "k1", "--database", db]);
    expectOk(sent);
    expect(sent.stdout).toBe('sent to run r1 on "decision" (idempotency key k1)\n');
    expectOk(await cli(["send", "r1", "decision", '{"approved": false}', "--key", "k1", "--json", "--database", db]));
    expect(await run.result()).toEqual({ approved: true });
    expect(acted).toEqual(["o1"]);
    const messages = await storeOf(cairn).query("SELECT count(*) AS n FROM cairn_messages WHERE run_id = 'r1'");
    expect(Number(messages.rows[0]!.n)).toBe(1);

    const late = await cli(["send", "r1", "decision", "{}", "--database", db]);
    expectOk(late);
    expect(late.stdout).toMatch(/note: run r1 already succeeded; nothing will receive this message/);
  });

  it("cancels a waiting run, resumes it, and the executor continues it", async () => {
    const { db, wf, acted } = await approvals();
    const run = await wf.start("o2", { id: "r2" });
    await eventually(async () => (await run.status()).status === "waiting");

    const cancelled = await cli(["cancel", "r2", "--database", db]);
    expectOk(cancelled);
    expect(cancelled.stdout).toBe("cancelled run r2\n");
    await expect(run.result()).rejects.toBeInstanceOf(CancelledError);
    expectOk(await cli(["cancel", "r2", "--database", db]));

    const resumed = await cli(["resume", "r2", "--json", "--database", db]);
    expectOk(resumed);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ runId: "r2", resumed: true });
    await eventually(async () => (await run.status()).status === "waiting");
    expectOk(await cli(["send", "r2", "decision", '{"approved": false}', "--database", db]));
    expect(await run.result()).toEqual({ approved: false });
    expect(acted).toEqual(["o2"]);

    expectOneLineError(await cli(["resume", "r2", "--database", db]), /run r2 is succeeded, not failed or cancelled/);
    expectOneLineError(await cli(["cancel", "r2", "--database", db]), /run r2 already succeeded; nothing to cancel/);
  });

  it("cancels a run in the middle of a step: the executor aborts the step at its next poll", async () => {
    const db = await env.database();
    const cairn = env.cairn(db, { pollIntervalMs: 50 });
    let aborted = false;
    const wf = cairn.workflow("slow", async (ctx) => {
      await ctx.step(
        "wait-for-abort",
        ({ signal }) =>
          new Promise<void>((resolve) =>
            signal.addEventListener("abort", () => {
              aborted = true;
              resolve();
            }),
          ),
      );
      return "finished";
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "s1" });
    await eventually(async () => (await storeOf(cairn).getRun("s1"))?.status === "running");

    const result = await cli(["cancel", "s1", "--json", "--database", db]);
    expectOk(result);
    expect(JSON.parse(result.stdout)).toEqual({ runId: "s1", cancelled: ["s1"] });
    await eventually(() => aborted);
    expect((await run.status()).status).toBe("cancelled");
    expect(await storeOf(cairn).loadJournal("s1")).toEqual([]);
  });

  it("forks a run from a seq: the journal below it is reused, the rest runs again", async () => {
    const db = await env.database();
    const cairn = env.cairn(db, { pollIntervalMs: 50 });
    const calls: string[] = [];
    const wf = cairn.workflow("two-steps", async (ctx, input: string) => {
      const a = await ctx.step("a", () => (calls.push("a"), `${input}-a`));
      const b = await ctx.step("b", () => (calls.push("b"), `${a}-b`));
      return b;
    });
    await cairn.launch();
    await (await wf.start("x", { id: "o1" })).result();
    expect(calls).toEqual(["a", "b"]);

    const forked = await cli(["fork", "o1", "--from", "1", "--id", "o1-fork", "--database", db]);
    expectOk(forked);
    expect(forked.stdout).toMatch(/^forked run o1 at seq 1 as o1-fork/);
    expect(await cairn.run("o1-fork").result()).toBe("x-a-b");
    expect(calls).toEqual(["a", "b", "b"]);
    const shown = await cli(["show", "o1-fork", "--database", db]);
    expect(shown.stdout).toMatch(/forked from\s+o1 at seq 1/);

    const anonymous = await cli(["fork", "o1", "--from", "0", "--json", "--database", db]);
    expectOk(anonymous);
    const { id } = JSON.parse(anonymous.stdout) as { id: string };
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(await cairn.run(id).result()).toBe("x-a-b");
    expect(calls).toEqual(["a", "b", "b", "a", "b"]);

    expectOneLineError(await cli(["fork", "o1", "--from", "1", "--id", "o1", "--database", db]), /a run with id "o1" already exists/);
    expectOneLineError(await cli(["fork", "o1", "--database", db]), /missing --from <seq>/);
    expectOneLineError(await cli(["fork", "o1", "--from", "-1", "--database", db]), /--from must be an integer ≥ 0/);
  });
});

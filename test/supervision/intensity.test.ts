import { describe, expect, it } from "vitest";
import { SupervisorShutdownError, type Cairn } from "../../src/index.js";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";

/**
 * OTP's restart intensity as a sliding window (supervisor.erl's add_restart: restarts at or after
 * now − period count, this one included; more than `intensity` gives up), backoff between restarts,
 * and an exit by someone else's cancel (`killed`), under a ManualClock. A child crashes when sent
 * "crash", so each crash happens at a clock time the test chose.
 */
describe.each(BACKENDS)("restart intensity, backoff and kills on $name", (backend) => {
  const env = cairnFactory(backend);

  function setup(cairn: Cairn) {
    const crasher = cairn.workflow("crasher", async (ctx) => {
      await ctx.recv("crash");
      throw new TypeError("crashed on demand");
    });
    const waitingRun = (id: string) =>
      eventually(
        async () =>
          (
            await cairn
              .run(id)
              .status()
              .catch(() => undefined)
          )?.status === "waiting",
      );
    const events = async (id: string) =>
      (await cairn.query("SELECT event FROM cairn_supervision WHERE run_id = $1 ORDER BY seq", [id])).rows.map((r) => String(r.event));
    return { crasher, waitingRun, events };
  }

  it("forgets restarts older than periodMs, counts one exactly periodMs old, and gives up past intensity", async () => {
    const clock = new ManualClock();
    const cairn = env.cairn(await env.database(), { clock });
    const { crasher, waitingRun, events } = setup(cairn);
    const sup = cairn.supervisor("sup", { intensity: 1, periodMs: 10_000, children: [{ id: "c", workflow: crasher }] });
    await cairn.launch();

    const slid = await sup.start(undefined, { id: "slide" });
    await waitingRun("slide/c");
    await cairn.send("slide/c", "crash", 1);
    await waitingRun("slide/c~1"); // 1 restart within the window: allowed
    clock.advance(10_001);
    await cairn.send("slide/c~1", "crash", 1);
    await waitingRun("slide/c~2"); // the first restart slid out of the window: allowed again
    expect(await events("slide")).not.toContain("give_up");
    expect((await slid.status()).status).not.toBe("failed");

    const edge = await sup.start(undefined, { id: "edge" });
    await waitingRun("edge/c");
    await cairn.send("edge/c", "crash", 1);
    await waitingRun("edge/c~1");
    clock.advance(10_000);
    await cairn.send("edge/c~1", "crash", 1);
    // The first restart is exactly periodMs old: still in the window, so this is the second: too many.
    await expect(edge.result()).rejects.toBeInstanceOf(SupervisorShutdownError);
  });

  it("waits the backoff (durably, doubling from minMs) before each restart", async () => {
    const clock = new ManualClock();
    const cairn = env.cairn(await env.database(), { clock });
    const { crasher, waitingRun, events } = setup(cairn);
    const sup = cairn.supervisor("sup", {
      intensity: 5,
      periodMs: 60_000,
      backoff: { minMs: 1_000, maxMs: 1_500 },
      children: [{ id: "c", workflow: crasher }],
    });
    await cairn.launch();
    await sup.start(undefined, { id: "s" });
    await waitingRun("s/c");
    await cairn.send("s/c", "crash", 1);
    await eventually(async () => (await events("s")).includes("exit"));
    await eventually(async () => (await cairn.query("SELECT count(*) AS n FROM cairn_steps WHERE run_id = 's' AND kind = 'sleep'")).rows[0]!.n == 1);
    clock.advance(999);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await events("s")).not.toContain("restart");
    clock.advance(1);
    await waitingRun("s/c~1");
    await cairn.send("s/c~1", "crash", 1);
    await eventually(async () => (await cairn.query("SELECT count(*) AS n FROM cairn_steps WHERE run_id = 's' AND kind = 'sleep'")).rows[0]!.n == 2);
    clock.advance(1_499); // 2 × 1000, capped at maxMs 1500
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await events("s")).filter((e) => e === "restart")).toHaveLength(1);
    clock.advance(1);
    await waitingRun("s/c~2");
  });

  it("an exit by someone else's cancel is `killed`: abnormal, so even a transient child is restarted", async () => {
    const cairn = env.cairn(await env.database());
    const { crasher, waitingRun } = setup(cairn);
    const sup = cairn.supervisor("sup", { children: [{ id: "c", workflow: crasher, restart: "transient" }] });
    await cairn.launch();
    await sup.start(undefined, { id: "s" });
    await waitingRun("s/c");
    await cairn.cancel("s/c");
    await waitingRun("s/c~1");
    const exit = await cairn.query("SELECT reason FROM cairn_supervision WHERE run_id = 's' AND event = 'exit'");
    expect(exit.rows).toEqual([{ reason: "killed" }]);
  });
});

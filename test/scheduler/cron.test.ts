import { describe, expect, it } from "vitest";
import { InvalidSpecError, type Cairn } from "../../src/index.js";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";

const MINUTE = 60_000;
const T0 = Date.UTC(2026, 0, 1, 0, 0, 0);
const iso = (minutes: number) => new Date(T0 + minutes * MINUTE).toISOString();

/** The ids of the runs a schedule started, in order. */
async function cronRuns(cairn: Cairn, name: string): Promise<string[]> {
  const { rows } = await cairn.query("SELECT id FROM cairn_runs WHERE id LIKE $1 ORDER BY id", [`cron:${name}:%`]);
  return rows.map((row) => String(row.id));
}

async function lastTick(cairn: Cairn, name: string): Promise<number> {
  const { rows } = await cairn.query("SELECT last_tick FROM cairn_schedules WHERE name = $1", [name]);
  return Number(rows[0]?.last_tick);
}

describe.each(BACKENDS)("cron schedules on $name", (backend) => {
  const env = cairnFactory(backend);

  /** A Cairn whose "tick" workflow counts its executions per run id in `done`. */
  function executor(db: string, clock: ManualClock, done: Map<string, number>, catchUp?: "skip" | "all" | "latest"): Cairn {
    // A lease longer than the clock's jumps: the manual clock advances a minute at once, and a
    // peer whose heartbeat renewal (sent on every advance) had not committed yet looked a minute
    // silent to a death check racing it — taken over mid-step, its step ran twice (a flake of this
    // test under load, not of cron: the ticks are what is tested here, takeover in queue-crash).
    const cairn = env.cairn(db, { clock, pollIntervalMs: 20, leaseMs: 10 * MINUTE });
    const wf = cairn.workflow("tick", async (ctx, input: { n: number }) => {
      const id = await ctx.step("run id", () => String(ctx.runId));
      await ctx.step("count", () => done.set(id, (done.get(id) ?? 0) + 1));
      return input.n;
    });
    cairn.schedule("every-minute", { cron: "* * * * *", workflow: wf, input: { n: 7 }, ...(catchUp === undefined ? {} : { catchUp }) });
    return cairn;
  }

  it("fires once per tick with three executors racing", async () => {
    const clock = new ManualClock(T0);
    const db = await env.database();
    const done = new Map<string, number>();
    const executors = [executor(db, clock, done), executor(db, clock, done), executor(db, clock, done)];
    await Promise.all(executors.map((c) => c.launch()));
    const ticks = 5;
    for (let minute = 1; minute <= ticks; minute++) {
      // All three loops wake on the same advance and start the same tick's run at once.
      clock.advance(MINUTE);
      await eventually(async () => (await lastTick(executors[0]!, "every-minute")) === T0 + minute * MINUTE);
    }
    const expected = Array.from({ length: ticks }, (_, i) => `cron:every-minute:${iso(i + 1)}`);
    await eventually(() => done.size === ticks);
    expect(await cronRuns(executors[1]!, "every-minute")).toEqual(expected);
    for (const id of expected) {
      expect(await executors[2]!.run(id).result()).toBe(7);
      expect(done.get(id)).toBe(1);
    }
    // Give the slower loops time to try their (refused) duplicate starts: still one run per tick.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await cronRuns(executors[0]!, "every-minute")).toEqual(expected);
  });

  for (const [catchUp, missed] of [
    ["skip", []],
    ["latest", [10]],
    ["all", [2, 3, 4, 5, 6, 7, 8, 9, 10]],
  ] as const) {
    it(`catches up after downtime: ${catchUp}`, async () => {
      const clock = new ManualClock(T0);
      const db = await env.database();
      const done = new Map<string, number>();
      const first = executor(db, clock, done, catchUp);
      await first.launch();
      clock.advance(MINUTE);
      await eventually(async () => (await cronRuns(first, "every-minute")).length === 1);
      await eventually(async () => (await lastTick(first, "every-minute")) === T0 + MINUTE);
      await first.shutdown();
      // Down from 00:01 to 00:10:30: ticks 00:02 ... 00:10 are missed.
      clock.set(T0 + 10.5 * MINUTE);
      const second = executor(db, clock, done, catchUp);
      await second.launch();
      await eventually(async () => (await lastTick(second, "every-minute")) === T0 + 10 * MINUTE);
      expect(await cronRuns(second, "every-minute")).toEqual([1, ...missed].map((m) => `cron:every-minute:${iso(m)}`));
      // And it goes on from the next tick.
      clock.set(T0 + 11 * MINUTE);
      await eventually(async () => (await cronRuns(second, "every-minute")).includes(`cron:every-minute:${iso(11)}`));
      expect(await cronRuns(second, "every-minute")).toHaveLength(missed.length + 2);
    });
  }

  it("reads cron fields in the schedule's time zone", async () => {
    const clock = new ManualClock(T0);
    const db = await env.database();
    const cairn = env.cairn(db, { clock });
    const wf = cairn.workflow("morning", async () => "up");
    cairn.schedule("paris-nine", { cron: "0 9 * * *", timezone: "Europe/Paris", workflow: wf });
    await cairn.launch();
    clock.set(Date.UTC(2026, 0, 1, 8, 0, 0)); // 09:00 in Paris (UTC+1 in winter)
    await eventually(async () => (await cronRuns(cairn, "paris-nine")).length === 1);
    expect(await cronRuns(cairn, "paris-nine")).toEqual(["cron:paris-nine:2026-01-01T08:00:00.000Z"]);
    const { rows } = await cairn.query("SELECT cron, workflow, timezone, catch_up FROM cairn_schedules");
    expect(rows).toEqual([{ cron: "0 9 * * *", workflow: "morning", timezone: "Europe/Paris", catch_up: "skip" }]);
  });

  it("refuses bad declarations at once, naming the field and the value", async () => {
    const cairn = env.cairn(await env.database());
    const wf = cairn.workflow("w", async () => 1);
    const other = env.cairn(await env.database()).workflow("w", async () => 1);
    const cases: [string, unknown, string, unknown][] = [
      ["s", { cron: "61 * * * *", workflow: wf }, "cron", "61 * * * *"],
      ["s", { cron: "* * *", workflow: wf }, "cron", "* * *"],
      ["s", { cron: "every day", workflow: wf }, "cron", "every day"],
      ["s", { cron: 5, workflow: wf }, "cron", 5],
      ["s", { cron: "* * * * *", workflow: wf, timezone: "Mars/Olympus" }, "timezone", "Mars/Olympus"],
      ["s", { cron: "* * * * *", workflow: wf, catchUp: "some" }, "catchUp", "some"],
      ["s", { cron: "* * * * *", workflow: async () => 1 }, "workflow", undefined],
      ["s", { cron: "* * * * *", workflow: other }, "workflow", other],
      ["s", { cron: "* * * * *", workflow: { name: "w", start: async () => 1 } }, "workflow", undefined],
      ["", { cron: "* * * * *", workflow: wf }, "name", ""],
    ];
    for (const [name, spec, field, value] of cases) {
      let error: unknown;
      try {
        cairn.schedule(name, spec as never);
      } catch (caught) {
        error = caught;
      }
      expect(error, `${field} ${String(value)}`).toBeInstanceOf(InvalidSpecError);
      expect((error as InvalidSpecError).field).toBe(field);
      if (value !== undefined) expect((error as InvalidSpecError).value).toBe(value);
    }
    cairn.schedule("ok", { cron: "@hourly", workflow: wf });
    expect(() => cairn.schedule("ok", { cron: "@hourly", workflow: wf })).toThrow(InvalidSpecError);
  });
});

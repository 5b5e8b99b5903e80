import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ManualClock } from "../../src/testing/index.js";
import { MAX_TIMER_DELAY_MS, setLongTimeout, setLongTimeoutAt } from "../../src/engine/long-timeout.js";
import { systemClock } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { storeOf } from "../../src/internal.js";

const DAY_MS = 86_400_000;

/** Node replaces a setTimeout delay over 2^31−1 ms by 1 ms and warns: these tests run on the real clock. */
function overflowWarnings(): { count: () => number; stop: () => void } {
  let count = 0;
  const listener = (warning: Error) => {
    if (warning.name === "TimeoutOverflowWarning") count++;
  };
  process.on("warning", listener);
  return { count: () => count, stop: () => process.off("warning", listener) };
}

describe("setLongTimeout", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("waits past 2^31−1 ms in chunks, and can be cleared between them", () => {
    const fired: string[] = [];
    setLongTimeout(() => fired.push("3e9"), 3e9);
    const cleared = setLongTimeout(() => fired.push("cleared"), 5e9);
    vi.advanceTimersByTime(MAX_TIMER_DELAY_MS);
    expect(fired).toEqual([]);
    cleared.clear();
    vi.advanceTimersByTime(3e9 - MAX_TIMER_DELAY_MS - 1);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual(["3e9"]);
    vi.advanceTimersByTime(10e9);
    expect(fired).toEqual(["3e9"]);
  });

  it("a wake-up at a time waits out a timer that fired early by the clock, once; and can be cleared", () => {
    const fired: number[] = [];
    let now = 1_000;
    setLongTimeoutAt(
      () => fired.push(now),
      1_150,
      () => now,
      { unref: true },
    );
    const cleared = setLongTimeoutAt(
      () => fired.push(-1),
      1_150,
      () => now,
    );
    // The timer fires after its 150 ms, but the clock reads 2 ms short of the wake-up (libuv's cached loop time).
    now = 1_148;
    vi.advanceTimersByTime(150);
    expect(fired).toEqual([]);
    cleared.clear();
    now = 1_150;
    vi.advanceTimersByTime(2);
    expect(fired).toEqual([1_150]);
    // A clock that moves only when told: the callback comes after the second wait anyway.
    const manual: number[] = [];
    setLongTimeoutAt(
      () => manual.push(now),
      now + 100,
      () => now,
    );
    vi.advanceTimersByTime(200);
    expect(manual).toEqual([1_150]);
  });

  it("the system clock's sleep of 30 days does not resolve early", async () => {
    const abort = new AbortController();
    let woke = false;
    const sleeping = systemClock.sleep(30 * DAY_MS, abort.signal).then(() => (woke = true));
    await vi.advanceTimersByTimeAsync(29 * DAY_MS);
    expect(woke).toBe(false);
    await vi.advanceTimersByTimeAsync(DAY_MS);
    await sleeping;
    expect(woke).toBe(true);
  });
});

describe.each(BACKENDS)("timers longer than 2^31−1 ms on $name", (backend) => {
  const env = cairnFactory(backend);

  it("a run deadline of 30 days and a step timeout of 3e9 ms do not fire at once", async () => {
    const warnings = overflowWarnings();
    try {
      const cairn = env.cairn(await env.database());
      const wf = cairn.workflow("patient", async (ctx) => {
        const a = await ctx.step("slowish", () => new Promise((resolve) => setTimeout(() => resolve("a"), 100)), { timeoutMs: 3e9 });
        const b = await ctx.step("later", () => new Promise((resolve) => setTimeout(() => resolve("b"), 50)));
        return `${String(a)}${String(b)}`;
      });
      await cairn.launch();
      const run = await wf.start(undefined, { id: "patient", timeoutMs: 30 * DAY_MS });
      expect(await run.result()).toBe("ab");
      expect(warnings.count()).toBe(0);
    } finally {
      warnings.stop();
    }
  });

  it("ctx.sleep(3e9) waits quietly: no overflow warnings, no busy wake-up loop", async () => {
    const warnings = overflowWarnings();
    try {
      const cairn = env.cairn(await env.database(), { pollIntervalMs: 1_000 });
      const wf = cairn.workflow("long-nap", async (ctx) => {
        await ctx.sleep("nap", 3e9);
        return "woke";
      });
      await cairn.launch();
      const store = storeOf(cairn);
      let wakeLookups = 0;
      const nextWakeAt = store.nextWakeAt.bind(store);
      store.nextWakeAt = (appVersion, workflows) => {
        wakeLookups++;
        return nextWakeAt(appVersion, workflows);
      };
      const run = await wf.start(undefined, { id: "long-nap" });
      await eventually(async () => (await run.status()).status === "waiting");
      const before = wakeLookups;
      // Long enough for a timer that overflowed to 1 ms to have fired hundreds of times.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(wakeLookups - before).toBeLessThanOrEqual(2);
      expect(warnings.count()).toBe(0);
      expect((await run.status()).status).toBe("waiting");
    } finally {
      warnings.stop();
    }
  });

  it("with a manual clock, a 3e9 ms sleep wakes exactly when that much time has passed", async () => {
    const clock = new ManualClock();
    const cairn = env.cairn(await env.database(), { clock });
    const wf = cairn.workflow("manual-nap", async (ctx) => {
      await ctx.sleep("nap", 3e9);
      return ctx.now();
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "manual-nap", timeoutMs: 40 * DAY_MS });
    await eventually(async () => (await run.status()).status === "waiting");
    clock.advance(MAX_TIMER_DELAY_MS);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect((await run.status()).status).toBe("waiting");
    clock.advance(3e9 - MAX_TIMER_DELAY_MS);
    expect(await run.result()).toBe(clock.now());
  });
});

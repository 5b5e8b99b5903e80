import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { runAttempts, type AttemptHost } from "../../src/engine/attempts.js";
import { systemClock } from "../../src/engine/clock.js";

/**
 * An attempt's `call.signal` follows the run's stop signal through one listener shared by every
 * attempt of the run (attempts.ts, AttemptSignal): what it must keep doing is abort with the run's
 * reason while the attempt runs, and nothing once the attempt is over.
 */
function host(stop: AbortController): AttemptHost {
  return { runId: "r", clock: systemClock, stopSignal: stop.signal, stopped: () => stop.signal.aborted };
}

describe("attempt signals", () => {
  it("abort with the run's reason while the attempt runs, and add no listener per attempt", async () => {
    const stop = new AbortController();
    const signals: AbortSignal[] = [];
    for (let seq = 0; seq < 50; seq++) {
      await runAttempts(host(stop), "step", seq, ({ signal }) => void signals.push(signal), {});
    }
    expect(getEventListeners(stop.signal, "abort").length).toBeLessThanOrEqual(1);

    let inFlight: AbortSignal | undefined;
    const running = runAttempts(
      host(stop),
      "slow",
      50,
      ({ signal }) =>
        new Promise((_, reject) => {
          inFlight = signal;
          signal.addEventListener("abort", () => reject(signal.reason as Error));
        }),
      {},
    );
    await Promise.resolve();
    const reason = new Error("run stopped");
    stop.abort(reason);
    const outcome = await running;
    expect(outcome.ok).toBe(false);
    expect(inFlight?.aborted).toBe(true);
    expect(inFlight?.reason).toBe(reason);
    // The attempts that were over by then keep their signals as they were.
    expect(signals.every((s) => !s.aborted)).toBe(true);
  });

  it("gives the step function a call whose own enumerable members are idempotencyKey, attempt, seq and signal", async () => {
    // The call is a class instance (a literal with a getter is a slow dictionary object), so a
    // caller that spreads it, lists its keys or serializes it must see what the literal gave.
    const stop = new AbortController();
    let seen: Record<string, unknown> | undefined;
    let spread: Record<string, unknown> | undefined;
    await runAttempts(
      host(stop),
      "shape",
      7,
      (call) => {
        seen = call as unknown as Record<string, unknown>;
        spread = { ...call };
      },
      {},
    );
    expect(Object.keys(seen!)).toEqual(["idempotencyKey", "attempt", "seq", "signal"]);
    expect(Object.keys(spread!)).toEqual(["idempotencyKey", "attempt", "seq", "signal"]);
    expect(spread).toMatchObject({ idempotencyKey: "r:7", attempt: 1, seq: 7 });
    expect(spread!.signal).toBeInstanceOf(AbortSignal);
    expect(spread!.signal).toBe(seen!.signal);
    expect(JSON.parse(JSON.stringify(seen))).toEqual({ idempotencyKey: "r:7", attempt: 1, seq: 7, signal: {} });
  });

  it("is aborted at once when read after the run stopped", async () => {
    const stop = new AbortController();
    stop.abort(new Error("gone"));
    let seen: AbortSignal | undefined;
    await runAttempts(host(stop), "late", 0, ({ signal }) => void (seen = signal), {});
    expect(seen?.aborted).toBe(true);
    expect((seen?.reason as Error).message).toBe("gone");
  });
});

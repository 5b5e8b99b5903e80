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

  it("is aborted at once when read after the run stopped", async () => {
    const stop = new AbortController();
    stop.abort(new Error("gone"));
    let seen: AbortSignal | undefined;
    await runAttempts(host(stop), "late", 0, ({ signal }) => void (seen = signal), {});
    expect(seen?.aborted).toBe(true);
    expect((seen?.reason as Error).message).toBe("gone");
  });
});

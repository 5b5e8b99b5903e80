import { describe, expect, it } from "vitest";
import { FencedError } from "../../src/errors.js";
import { StopSignal } from "../../src/engine/run/stop-signal.js";

/**
 * A run's stop signal is made only when something reads it (stop-signal.ts): what must hold is
 * that a reader sees exactly what an eager AbortController would have shown it — before the stop,
 * at the stop, and after it — while a run nobody listened to builds neither signal nor reason.
 */
describe("run stop signal", () => {
  it("aborts a signal read before the stop, with the first stop's reason", () => {
    const stop = new StopSignal();
    const signal = stop.signal;
    const seen: unknown[] = [];
    signal.addEventListener("abort", () => seen.push(signal.reason));
    expect(signal.aborted).toBe(false);
    stop.abort(() => new FencedError("run settled"));
    stop.abort(() => new Error("a later stop"));
    expect(signal.aborted).toBe(true);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toBeInstanceOf(FencedError);
    expect((seen[0] as Error).message).toBe("run settled");
  });

  it("hands a signal read after the stop back already aborted, with the same reason", () => {
    const stop = new StopSignal();
    stop.abort(() => new FencedError("run unloaded while it waits"));
    expect(stop.aborted).toBe(true);
    const signal = stop.signal;
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBeInstanceOf(FencedError);
    expect(stop.signal.reason).toBe(signal.reason);
  });

  it("builds no reason for a stop nobody listened to, and builds it once for any number of readers", () => {
    const stop = new StopSignal();
    let built = 0;
    stop.abort(() => {
      built++;
      return new FencedError("run settled");
    });
    expect(built).toBe(0);
    const first = stop.signal.reason;
    const second = stop.signal.reason;
    expect(built).toBe(1);
    expect(second).toBe(first);
  });
});

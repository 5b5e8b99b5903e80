import { now, type BenchInput, type Producer } from "./system.js";

/**
 * The two measurements, run by whichever process produces. Latency: one run at a time, each
 * enqueued only after the previous one began, so every sample is an idle system's wake-up.
 * Throughput: `runs` runs enqueued `inFlight` at a time into executors that are already up, timed
 * from the first enqueue until the database counts them all finished.
 */

/** Resolves when the run with index `i` reports its start (the body's first line), with that time. */
export type StartWaiter = (i: number) => Promise<number>;

export async function measureLatency(producer: Producer, samples: number, firstIndex: number, started: StartWaiter): Promise<number[]> {
  const latencies: number[] = [];
  for (let k = 0; k < samples; k++) {
    const i = firstIndex + k;
    const input: BenchInput = { i, t: now(), report: true };
    const begun = started(i);
    await producer.enqueue(`run-${i}`, input);
    latencies.push((await begun) - input.t);
  }
  return latencies;
}

export interface Throughput {
  runs: number;
  /** Runs finished per second once the executors were finishing them (see completionRate). */
  runsPerSecond: number;
  /**
   * Runs per second from the first run's start (its body's first line, reported by the executor)
   * until the database counted every run finished: the executors' process start-up left out, which
   * `runsPerSecond` cannot always do — when a fast executor (SQLite) drains the queue while it is
   * still starting, before the first reading, that figure fell back to a window of a few ms and
   * printed millions of runs/s.
   */
  startToDoneRunsPerSecond: number;
  /** From the executors' start until the database counted every run finished (their start-up included). */
  drainMs: number;
  /** Enqueues per second of the producer, filling the queue beforehand. */
  enqueuePerSecond: number;
}

/** Enqueues `runs` runs, `inFlight` at a time; returns how long it took. */
export async function fill(producer: Producer, runs: number, firstIndex: number, inFlight: number, report: boolean): Promise<number> {
  const begin = now();
  let next = 0;
  const enqueuer = async (): Promise<void> => {
    while (next < runs) {
      const i = firstIndex + next++;
      await producer.enqueue(`run-${i}`, { i, t: now(), report });
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, runs) }, enqueuer));
  return now() - begin;
}

/** A reading of the database's count of finished runs. */
export interface CountSample {
  at: number;
  done: number;
}

/**
 * Waits until the database counts `target` finished runs, polling; returns the readings. Each
 * reading is a count over the system's runs, paid for by the machine under measurement (in the
 * executor's own process for a local producer: every 5 ms, 5–10% of a SQLite drain's CPU), so the
 * interval grows with the wait — 5 ms, or 2% of the time waited so far — which bounds how late the
 * last reading sees the end to ~2% of the drain (throughput is only ever under-stated by it).
 */
export async function waitCompleted(producer: Producer, target: number, timeoutMs: number): Promise<CountSample[]> {
  const begin = now();
  const samples: CountSample[] = [];
  for (;;) {
    const done = await producer.completed();
    samples.push({ at: now(), done });
    if (done >= target) return samples;
    if (now() - begin > timeoutMs) throw new Error(`only ${done} of ${target} runs finished within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, Math.max(5, (now() - begin) / 50)));
  }
}

/**
 * Finishes per second once the executors were finishing runs: from the first reading that counts
 * any (the runs it counts are left out) to the reading that counts them all. Executors finish in
 * bursts (a group commit, a batch claimed at once), so a window between two percentiles can fall
 * inside one burst; this one cannot, and it leaves out the executors' start-up. When everything
 * finished in one burst there is no window: the rate is that of the whole drain. Nor is there one
 * when the first reading already counts most of the runs (a fast drain between two polls): a window
 * over the last few runs measured a few ms and printed millions of runs/s, so the window must
 * cover at least half of the runs, else the whole drain's rate stands.
 */
export function completionRate(samples: readonly CountSample[], before: number, runs: number, drainStart: number): number {
  const first = samples.find((s) => s.done > before);
  const last = samples.find((s) => s.done - before >= runs);
  if (first === undefined || last === undefined) return NaN;
  if (last.at > first.at && (last.done - first.done) * 2 >= runs) return ((last.done - first.done) * 1000) / (last.at - first.at);
  return (runs * 1000) / (last.at - drainStart);
}

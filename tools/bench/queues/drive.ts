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
  /** Runs finished per second while the queue was full: between 10% and 90% of them finished (the database's count). */
  runsPerSecond: number;
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

/** Waits until the database counts `target` finished runs, polling; returns the readings. */
export async function waitCompleted(producer: Producer, target: number, timeoutMs: number): Promise<CountSample[]> {
  const begin = now();
  const samples: CountSample[] = [];
  for (;;) {
    const done = await producer.completed();
    samples.push({ at: now(), done });
    if (done >= target) return samples;
    if (now() - begin > timeoutMs) throw new Error(`only ${done} of ${target} runs finished within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * Finishes per second while the queue was full, from the count's readings: from the last reading
 * below 10% of `runs` finished (after `before`) to the first at or past 90%, so neither the
 * executors' start-up nor the last stragglers count. (Starting from the last reading below 10%
 * rather than the first past it keeps the window open when a batch crosses both marks at once.)
 */
export function completionRate(samples: readonly CountSample[], before: number, runs: number): number {
  const hiIndex = samples.findIndex((s) => s.done - before >= 0.9 * runs);
  let loIndex = samples.findIndex((s) => s.done - before >= 0.1 * runs) - 1;
  if (hiIndex < 0) return NaN;
  loIndex = Math.max(0, Math.min(loIndex, hiIndex - 1));
  const lo = samples[loIndex]!;
  const hi = samples[hiIndex]!;
  return hi.at > lo.at ? ((hi.done - lo.done) * 1000) / (hi.at - lo.at) : NaN;
}

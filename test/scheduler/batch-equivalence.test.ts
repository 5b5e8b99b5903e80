import { describe, expect, it } from "vitest";
import { pick, seededRandom } from "../../tools/util/random.js";
import type { QueueOptions } from "../../src/scheduler/queue-spec.js";
import { POLICIES, type BuiltInPolicy } from "../../src/scheduler/policies.js";
import { Queues } from "../../src/scheduler/queues.js";
import { ManualClock } from "../../src/testing/index.js";
import { storeOf } from "../../src/internal.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

// A batch decision (several runs per statement, dispatch-sql.ts batchSql) must decide exactly what
// asking the policy one pair at a time decides. The same scenario is played on two databases: one
// queue with a built-in policy (batched), one with the same policy's SQL given as a user policy
// (one decision per statement, the reference); the decisions of one dispatch pass must match.
// BATCH_EQUIVALENCE_CASES raises the number of random scenarios (a seeded generator: reproducible).
const CASES = Number(process.env.BATCH_EQUIVALENCE_CASES ?? "6");

/** A seeded generator (tools/util/random.ts), so a failing case can be replayed by its seed. */
function random(seed: number) {
  const next = seededRandom(seed);
  return {
    next,
    int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: <T>(xs: readonly T[]) => pick(next, xs),
  };
}

interface Scenario {
  policy: BuiltInPolicy;
  options: QueueOptions;
  executors: { capacity: number; partitions: string[] }[];
  runs: { key: string | null; priority: number; tick: number }[];
}

function scenario(seed: number): Scenario {
  const r = random(seed);
  const maybe = (n: () => number) => (r.next() < 0.5 ? undefined : n());
  const policy = r.pick(["fifo", "least_loaded", "locality"] as const);
  const many = r.next() < 0.5; // past the shortlist (100): its bounds come into play
  const count = many ? r.int(101, 160) : r.int(5, 60);
  const keys = r.next() < 0.3 ? [null] : [null, "a", "b", "c", "heavy", "heavy", "heavy"];
  const priority = r.next() < 0.3;
  const rate = maybe(() => r.int(2, 40));
  const options: QueueOptions = {
    concurrency: maybe(() => r.int(3, 40)),
    workerConcurrency: maybe(() => r.int(1, 12)),
    rateLimit: rate === undefined ? undefined : { limit: rate, periodMs: 60_000 },
    priority,
    partitionBy: r.next() < 0.5 ? { concurrency: r.int(1, 4) } : undefined,
    policy,
    localityWaitMs: r.pick([0, 60_000]),
  };
  for (const key of Object.keys(options) as (keyof QueueOptions)[]) if (options[key] === undefined) delete options[key];
  return {
    policy,
    options,
    executors: Array.from({ length: r.int(1, 3) }, () => ({ capacity: r.int(2, 30), partitions: r.next() < 0.5 ? [r.pick(["a", "b", "heavy"])] : [] })),
    // Past the shortlist every enqueue gets its own millisecond: ties at the shortlist's edge are
    // decided arbitrarily by both (LIMIT), not a difference between them.
    runs: Array.from({ length: count }, () => ({ key: r.pick(keys), priority: priority ? r.int(0, 2) : 0, tick: many || r.next() < 0.5 ? 1 : 0 })),
  };
}

describe.each(BACKENDS)("batch dispatch decides as one pair at a time, on $name", (backend) => {
  const env = cairnFactory(backend);

  /** One dispatch pass of `s` on a fresh database; the decisions as "run → executor index". */
  async function play(s: Scenario, batched: boolean): Promise<string[]> {
    const db = await env.database();
    const clock = new ManualClock();
    const cairn = env.cairn(db, { clock });
    const options = batched ? s.options : { ...s.options, policy: { sql: POLICIES[s.policy] } };
    cairn.queue("q", options);
    const job = cairn.workflow("job", async (_ctx, n: number) => n);
    for (const [i, run] of s.runs.entries()) {
      clock.advance(run.tick);
      await job.enqueue("q", i, {
        id: `r${String(i).padStart(3, "0")}`,
        partitionKey: run.key ?? undefined,
        priority: s.options.priority ? run.priority : undefined,
      });
    }
    const store = storeOf(cairn);
    const now = clock.now();
    const ids = s.executors.map((_, i) => `exec-${i}`);
    let dispatcher: Queues | undefined;
    for (const [i, e] of s.executors.entries()) {
      await store.registerExecutor({
        id: ids[i]!,
        hostname: "h",
        pid: 1,
        backendPid: null,
        pidNamespace: null,
        appVersion: "default",
        startedAt: now,
        heartbeatAt: now,
        capacity: e.capacity,
      });
      const queues = new Queues(store, { partitions: e.partitions });
      queues.declare("q", options);
      await queues.register(ids[i]!, now);
      dispatcher ??= queues;
    }
    const outcome = await dispatcher!.dispatch(ids[0]!, now, 30_000);
    await cairn.shutdown();
    return outcome!.decisions.map((d) => `${d.runId} → ${ids.indexOf(d.executorId)}`).sort();
  }

  it.each(Array.from({ length: CASES }, (_, i) => 1000 + i))("seed %i", async (seed) => {
    const s = scenario(seed);
    const reference = await play(s, false);
    const batched = await play(s, true);
    expect({ seed, scenario: s.options, decisions: batched }).toEqual({ seed, scenario: s.options, decisions: reference });
  });
});

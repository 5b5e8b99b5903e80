import { describe, expect, it } from "vitest";
import { pick, seededRandom } from "../../tools/util/random.js";
import { incomingDecision, nextDecision } from "../../src/scheduler/dispatch-sql.js";
import type { QueueOptions } from "../../src/scheduler/queue-spec.js";
import { POLICIES, type BuiltInPolicy } from "../../src/scheduler/policies.js";
import { POSTGRES, SQLITE } from "../../src/store/dialect.js";
import { Queues } from "../../src/scheduler/queues.js";
import { ManualClock } from "../../src/testing/index.js";
import { storeOf } from "../../src/internal.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

// The decision an enqueue takes for its own run before writing it (PostgreSQL's enqueue function:
// the policy over `candidates` built from the run's parameters, dispatch-sql.ts `incoming`) must be
// the decision a dispatch pass would take once the run is written and is the only ready run of its
// queue (the policy over `candidates` built from the waiting runs). Random scenarios: queue limits,
// executors of two app versions serving partitions, some of their slots taken by runs of the queue
// (dispatched by a real pass, so the rate limit counts them too); every run still waiting is
// cancelled, then both decisions are asked for the same run. INCOMING_EQUIVALENCE_CASES raises the
// number of scenarios (seeded: a failing seed replays).
const CASES = Number(process.env.INCOMING_EQUIVALENCE_CASES ?? "40");
const LEASE_MS = 30_000;

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
  executors: { capacity: number; partitions: string[]; appVersion: string }[];
  /** Runs enqueued and dispatched by one pass before: the load the decision sees. */
  earlier: (string | null)[];
  incoming: { key: string | null; priority: number };
}

function scenario(seed: number): Scenario {
  const r = random(seed);
  const maybe = (n: () => number) => (r.next() < 0.5 ? undefined : n());
  const policy = r.pick(["fifo", "least_loaded", "locality"] as const);
  const keys = [null, "a", "b"];
  const rate = maybe(() => r.int(1, 6));
  const priority = r.next() < 0.3;
  const options: QueueOptions = {
    concurrency: maybe(() => r.int(1, 6)),
    workerConcurrency: maybe(() => r.int(1, 3)),
    rateLimit: rate === undefined ? undefined : { limit: rate, periodMs: 60_000 },
    priority,
    partitionBy: r.next() < 0.5 ? { concurrency: r.int(1, 2) } : undefined,
    localityWaitMs: r.pick([0, 60_000]),
  };
  for (const key of Object.keys(options) as (keyof QueueOptions)[]) if (options[key] === undefined) delete options[key];
  return {
    policy,
    options,
    executors: Array.from({ length: r.int(1, 3) }, () => ({
      capacity: r.int(1, 4),
      partitions: r.next() < 0.5 ? [r.pick(["a", "b"])] : [],
      appVersion: r.next() < 0.8 ? "default" : "other",
    })),
    earlier: Array.from({ length: r.int(0, 8) }, () => r.pick(keys)),
    incoming: { key: r.pick(keys), priority: priority ? r.int(0, 2) : 0 },
  };
}

describe.each(BACKENDS)("a decision at enqueue is the one a pass would take, on $name", (backend) => {
  const env = cairnFactory(backend);

  async function play(s: Scenario): Promise<{ incoming: string | null; pass: string | null; load: number }> {
    const db = await env.database();
    const clock = new ManualClock();
    const cairn = env.cairn(db, { clock });
    // The same policy's SQL as a user policy: enqueues write the run and nothing else (no stored
    // function deciding it at enqueue), so the pass below is the reference.
    const options = { ...s.options, policy: { sql: POLICIES[s.policy] } };
    cairn.queue("q", options);
    const job = cairn.workflow("job", async (_ctx, n: number) => n);
    await cairn.query("SELECT 1"); // migrated
    const store = storeOf(cairn);
    const ids = s.executors.map((_, i) => `exec-${i}`);
    let dispatcher: Queues | undefined;
    for (const [i, e] of s.executors.entries()) {
      await store.registerExecutor({
        id: ids[i]!,
        hostname: "h",
        pid: 1,
        backendPid: null,
        pidNamespace: null,
        appVersion: e.appVersion,
        startedAt: clock.now(),
        heartbeatAt: clock.now(),
        capacity: e.capacity,
      });
      const queues = new Queues(store, { partitions: e.partitions });
      queues.declare("q", options);
      await queues.register(ids[i]!, clock.now());
      dispatcher ??= queues;
    }
    for (const [i, key] of s.earlier.entries()) {
      clock.advance(1);
      await job.enqueue("q", i, { id: `e${i}`, partitionKey: key ?? undefined });
    }
    clock.advance(1);
    const outcome = await dispatcher!.dispatch(ids[0]!, clock.now(), LEASE_MS);
    for (const [i] of s.earlier.entries()) {
      if (!outcome!.decisions.some((d) => d.runId === `e${i}`)) await cairn.cancel(`e${i}`);
    }

    clock.advance(1);
    const now = clock.now();
    const d = backend.name === "postgres" ? POSTGRES : SQLITE;
    const run = { id: "$5", workflow: "$6", appVersion: "$7", partitionKey: "$8", priority: "$9", enqueuedAt: "$2", notBefore: "$10" };
    const at = { queue: "$1", now: "$2", dispatcher: "$3", oldestHeartbeat: "$4" };
    const [chosen] = await store.select<{ executor_id: string }>({ text: incomingDecision(d, POLICIES[s.policy], run, at) }, [
      "q",
      now,
      null,
      now - LEASE_MS,
      "incoming",
      "job",
      "default",
      s.incoming.key,
      s.incoming.priority,
      null,
    ]);
    await job.enqueue("q", -1, {
      id: "incoming",
      partitionKey: s.incoming.key ?? undefined,
      priority: s.options.priority ? s.incoming.priority : undefined,
    });
    const [next] = await store.select<{ run_id: string; executor_id: string }>(nextDecision(d, POLICIES[s.policy]), ["q", now, null, now - LEASE_MS]);
    if (next !== undefined) expect(next.run_id).toBe("incoming"); // the only ready run
    await cairn.shutdown();
    return { incoming: chosen?.executor_id ?? null, pass: next?.executor_id ?? null, load: outcome!.decisions.length };
  }

  it.each(Array.from({ length: CASES }, (_, i) => 2000 + i))("seed %i", async (seed) => {
    const s = scenario(seed);
    const { incoming, pass, load } = await play(s);
    expect({ seed, scenario: s, load, decision: incoming }).toEqual({ seed, scenario: s, load, decision: pass });
  });
});

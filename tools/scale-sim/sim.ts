import type { Costs } from "./costs.js";

/**
 * A discrete-event simulation of N executors running runs stored in M partitions, each partition a
 * database server of its own (a PostgreSQL primary, or one range's leader in a distributed SQL
 * engine). It models what the statements in docs/scale.md do, with the costs measured on this
 * machine:
 *
 * - A partition is one server with group commit: whatever commits are waiting when it frees up
 *   are served as one batch, costing `a + x·b` for a batch of `b` (a: the round trip and fsync
 *   every batch pays; x: each commit's own work). With the measured costs, one run stepping alone
 *   sees the measured step latency, and a full partition serves the measured steps per second.
 * - A claim is a statement of its own on one partition: `claimFixed + claimPerRun·n`.
 * - An executor is one thread: each step costs it `executorCpuPerStep` of CPU, served in order.
 * - A run has `stepsPerRun` steps, then a finish, which the partition pays as two commits (the
 *   finish, and the insert of the run that replaces it: the backlog never runs dry).
 * - Each executor holds up to `runsPerExecutor` runs and claims more when a quarter is free,
 *   from its partitions in turn. Heartbeats (one per 5 s per executor) go to partition 0, the
 *   only statement that crosses partitions; it costs a claim's fixed part.
 */
export interface SimSettings {
  executors: number;
  partitions: number;
  stepsPerRun: number;
  runsPerExecutor: number;
  /** Extra network round trip per statement, beyond what the measurement included (loopback). */
  extraRttUs: number;
  /** "all": every executor claims from every partition; "local": executor i serves partition i mod M. */
  assignment: "all" | "local";
  warmupSeconds: number;
  seconds: number;
}

export interface SimResult {
  runsPerSecond: number;
  stepsPerSecond: number;
  /** Mean busy fraction of the executors' threads, and of the partitions' servers. */
  executorBusy: number;
  partitionBusy: number;
}

interface Event {
  at: number;
  seq: number;
  fire: () => void;
}

/** A binary heap of events by time (then by insertion, so ties keep their order). */
class Agenda {
  private heap: Event[] = [];
  private seq = 0;
  now = 0;

  at(time: number, fire: () => void): void {
    const heap = this.heap;
    heap.push({ at: time, seq: this.seq++, fire });
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!earlier(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  run(until: number): void {
    while (this.heap.length > 0 && this.heap[0]!.at <= until) {
      const event = this.pop();
      this.now = event.at;
      event.fire();
    }
    this.now = until;
  }

  private pop(): Event {
    const heap = this.heap;
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && earlier(heap[l]!, heap[m]!)) m = l;
        if (r < heap.length && earlier(heap[r]!, heap[m]!)) m = r;
        if (m === i) break;
        [heap[i], heap[m]] = [heap[m]!, heap[i]!];
        i = m;
      }
    }
    return top;
  }
}

function earlier(a: Event, b: Event): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

/** A server that serves one job at a time, in order. */
class Server {
  busyUs = 0;
  private freeAt = 0;
  constructor(private readonly agenda: Agenda) {}

  /** Queues `costUs` of work; `done` fires when it is finished. */
  serve(costUs: number, done: () => void): void {
    const start = Math.max(this.agenda.now, this.freeAt);
    this.freeAt = start + costUs;
    this.busyUs += costUs;
    this.agenda.at(this.freeAt, done);
  }
}

/** A partition's server with group commit: commits waiting when it frees up go as one batch. */
class Partition {
  busyUs = 0;
  private waiting: { weight: number; done: () => void }[] = [];
  private claims: { costUs: number; done: () => void }[] = [];
  private busy = false;

  constructor(
    private readonly agenda: Agenda,
    private readonly fixedUs: number,
    private readonly perCommitUs: number,
  ) {}

  commit(weight: number, done: () => void): void {
    this.waiting.push({ weight, done });
    this.next();
  }

  statement(costUs: number, done: () => void): void {
    this.claims.push({ costUs, done });
    this.next();
  }

  private next(): void {
    if (this.busy) return;
    let cost: number;
    let dones: (() => void)[];
    if (this.claims.length > 0) {
      const claim = this.claims.shift()!;
      cost = claim.costUs;
      dones = [claim.done];
    } else if (this.waiting.length > 0) {
      const batch = this.waiting;
      this.waiting = [];
      cost = this.fixedUs + this.perCommitUs * batch.reduce((sum, c) => sum + c.weight, 0);
      dones = batch.map((c) => c.done);
    } else {
      return;
    }
    this.busy = true;
    this.busyUs += cost;
    this.agenda.at(this.agenda.now + cost, () => {
      this.busy = false;
      for (const done of dones) done();
      this.next();
    });
  }
}

export function simulate(costs: Costs, s: SimSettings): SimResult {
  const agenda = new Agenda();
  const perCommitUs = 1e6 / costs.partitionStepsPerSecond;
  // One run stepping alone: executor CPU, then a batch of one — together the measured latency.
  const fixedUs = Math.max(0, costs.stepLatencyUs - costs.executorCpuPerStepUs - perCommitUs);
  const partitions = Array.from({ length: s.partitions }, () => new Partition(agenda, fixedUs, perCommitUs));
  const rtt = s.extraRttUs;
  // With thousands of runs in flight on one partition a batch lasts long (every run's next step):
  // warm up past the first claims and several batches, and measure over many batches, so the
  // window's edges do not cut a batch's worth of steps in or out.
  const batchUs = ((s.executors * s.runsPerExecutor) / s.partitions) * perCommitUs;
  const claimsUs = (s.executors / s.partitions) * (costs.claimFixedUs + costs.claimPerRunUs * s.runsPerExecutor);
  const warmupUs = Math.max(s.warmupSeconds * 1e6, 5 * batchUs + 2 * claimsUs);
  const seconds = Math.max(s.seconds, Math.min(10, (30 * batchUs) / 1e6));
  const endUs = warmupUs + seconds * 1e6;
  let runsDone = 0;
  let stepsDone = 0;
  const measuring = () => agenda.now >= warmupUs;

  const executors = Array.from({ length: s.executors }, (_, e) => {
    const cpu = new Server(agenda);
    const mine = s.assignment === "all" ? partitions.map((_, p) => p) : [e % s.partitions];
    let held = 0;
    let claiming = false;
    let turn = e;

    const step = (partition: Partition, left: number): void => {
      cpu.serve(costs.executorCpuPerStepUs, () => {
        if (left === 0) {
          // The finish, and the insert of the run replacing it.
          partition.commit(2, () =>
            agenda.at(agenda.now + rtt, () => {
              if (measuring()) runsDone++;
              held--;
              maybeClaim();
            }),
          );
          return;
        }
        partition.commit(1, () =>
          agenda.at(agenda.now + rtt, () => {
            if (measuring()) stepsDone++;
            step(partition, left - 1);
          }),
        );
      });
    };

    const maybeClaim = (): void => {
      if (claiming || held > s.runsPerExecutor * 0.75) return;
      claiming = true;
      const p = mine[turn++ % mine.length]!;
      const n = s.runsPerExecutor - held;
      held += n;
      partitions[p]!.statement(costs.claimFixedUs + costs.claimPerRunUs * n, () =>
        agenda.at(agenda.now + rtt, () => {
          claiming = false;
          for (let i = 0; i < n; i++) step(partitions[p]!, s.stepsPerRun);
          maybeClaim();
        }),
      );
    };

    const heartbeat = (): void => {
      partitions[0]!.statement(costs.claimFixedUs, () => undefined);
      agenda.at(agenda.now + 5e6, heartbeat);
    };
    // Executors start at spread-out moments, as a fleet does.
    agenda.at((e * 1000) % 50_000, () => {
      maybeClaim();
      heartbeat();
    });
    return cpu;
  });

  agenda.run(warmupUs);
  const cpuAtWarmup = executors.map((cpu) => cpu.busyUs);
  const partitionAtWarmup = partitions.map((p) => p.busyUs);
  agenda.run(endUs);
  const window = endUs - warmupUs;
  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  // Runs per second from the steps committed in the window: with thousands of runs in flight a run
  // takes longer than the window, so counting finished runs would see the start-up's lockstep.
  void runsDone;
  return {
    runsPerSecond: stepsDone / s.stepsPerRun / seconds,
    stepsPerSecond: stepsDone / seconds,
    executorBusy: Math.min(1, mean(executors.map((cpu, i) => (cpu.busyUs - cpuAtWarmup[i]!) / window))),
    partitionBusy: Math.min(1, mean(partitions.map((p, i) => (p.busyUs - partitionAtWarmup[i]!) / window))),
  };
}

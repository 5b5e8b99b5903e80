import { InvalidInputError, InvalidSpecError } from "../../errors.js";
import type { Clock } from "../../engine/clock.js";
import type { Store } from "../../store/store.js";
import { CATCH_UP_LIMIT, tickRunId, type Schedule } from "./schedule-spec.js";
import { nextTick, ticksBetween } from "./ticks.js";

/** What the cron loop needs from the runtime. */
export interface CronHost {
  readonly clock: Clock;
  readyStore(): Promise<Store>;
}

/** The longest the loop sleeps (clock time) before it looks again, whatever the next tick. */
const MAX_SLEEP_MS = 60_000;
/** Real time between tries after a failed wake-up (a database outage), doubling up to the max. */
const RETRY_MS = 250;
const MAX_RETRY_MS = 5_000;
/** How long shutdown waits for a wake-up in progress. */
const STOP_WAIT_MS = 5_000;

/**
 * Fires the schedules declared on one Cairn. Every executor declaring a schedule runs this loop
 * and fires each due tick by starting the run `cron:<name>:<tick ISO time>`; a start with an id
 * that exists starts nothing, so however many executors race, a tick starts one run.
 *
 * Failure semantics. A tick's run is started at most once (its id is the tick), and at least once
 * while any executor declaring the schedule is running, within the catch-up policy. The schedule's
 * row records the latest tick handled (`last_tick`, moved forward only, compare-and-set) after the
 * runs are started: a crash between the two re-fires those ticks on the next wake-up, and the ids
 * absorb it. A tick whose start the workflow's input schema refuses is reported to `onError` and
 * passed over; a database error leaves `last_tick` where it was and is tried again, with backoff.
 * Ticks that fell due before this executor launched and after `last_tick` were missed (every
 * executor was down): `catchUp` decides which of them fire. A run started by a tick is an ordinary
 * run: if retention deletes it, nothing re-fires it, since `last_tick` has moved past it.
 */
export class CronScheduler {
  private readonly schedules = new Map<string, Schedule>();
  /** Schedules whose definition is not yet written to cairn_schedules. */
  private readonly unstored = new Set<string>();
  private stopper: AbortController | null = null;
  private loop: Promise<void> | null = null;
  /** Ticks before this time fell due while this executor was not running. */
  private since = 0;
  private wakeUp: (() => void) | null = null;

  constructor(
    private readonly host: CronHost,
    private readonly onError: (error: unknown) => void,
  ) {}

  declare(schedule: Schedule): void {
    if (this.schedules.has(schedule.name)) {
      throw new InvalidSpecError("name", schedule.name, "a schedule with this name is already declared on this Cairn");
    }
    this.schedules.set(schedule.name, schedule);
    this.unstored.add(schedule.name);
    this.wakeUp?.();
  }

  list(): Schedule[] {
    return [...this.schedules.values()];
  }

  /** Writes the declarations to the database, then fires ticks until `stop`. */
  async start(): Promise<void> {
    if (this.loop !== null) return;
    this.since = this.host.clock.now();
    await this.storeDefinitions(await this.host.readyStore());
    const stopper = new AbortController();
    this.stopper = stopper;
    this.loop = this.run(stopper.signal);
  }

  async stop(): Promise<void> {
    this.stopper?.abort();
    this.wakeUp?.();
    if (this.loop === null) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.loop, new Promise((resolve) => (timer = setTimeout(resolve, STOP_WAIT_MS)))]);
    clearTimeout(timer);
  }

  private async run(signal: AbortSignal): Promise<void> {
    let retryMs = RETRY_MS;
    while (!signal.aborted) {
      let next = Infinity;
      try {
        const store = await this.host.readyStore();
        await this.storeDefinitions(store);
        for (const schedule of this.schedules.values()) {
          if (signal.aborted) return;
          const handled = await this.fireDue(store, schedule, this.host.clock.now());
          next = Math.min(next, nextTick(schedule.cron, schedule.timezone, handled));
        }
        retryMs = RETRY_MS;
      } catch (error) {
        if (signal.aborted) return;
        this.onError(error);
        await this.pause(signal, () => new Promise((resolve) => setTimeout(resolve, retryMs)));
        retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
        continue;
      }
      const wait = Math.min(next - this.host.clock.now(), MAX_SLEEP_MS);
      if (wait > 0) await this.pause(signal, (wake) => this.host.clock.sleep(wait, wake));
    }
  }

  /** Waits for `sleep`, cut short by `stop` or a new declaration. */
  private async pause(signal: AbortSignal, sleep: (wake: AbortSignal) => Promise<unknown>): Promise<void> {
    if (signal.aborted) return;
    const wake = new AbortController();
    this.wakeUp = () => wake.abort();
    try {
      await Promise.race([sleep(wake.signal), new Promise((resolve) => wake.signal.addEventListener("abort", resolve, { once: true }))]);
    } catch {
      // Woken early.
    } finally {
      this.wakeUp = null;
    }
  }

  /** Inserts new schedules (their `last_tick` is now), and updates the definition of known ones. */
  private async storeDefinitions(store: Store): Promise<void> {
    for (const name of [...this.unstored]) {
      const s = this.schedules.get(name)!;
      const now = this.host.clock.now();
      const definition = { cron: s.cron, workflow: s.workflow.name, input: s.inputText, timezone: s.timezone, catch_up: s.catchUp };
      await store.commit(null, [
        {
          type: "insert",
          table: "cairn_schedules",
          values: { name, ...definition, last_tick: now, created_at: now, updated_at: now },
          onConflict: { keys: ["name"], action: "ignore" },
        },
        { type: "update", table: "cairn_schedules", where: { name }, set: { ...definition, updated_at: now } },
      ]);
      this.unstored.delete(name);
    }
  }

  /** Fires the schedule's due ticks; returns the latest tick handled (fired or passed over). */
  private async fireDue(store: Store, schedule: Schedule, now: number): Promise<number> {
    const rows = await store.select<{ last_tick: number | string }>("SELECT last_tick FROM cairn_schedules WHERE name = $1", [schedule.name]);
    if (rows[0] === undefined) {
      // Deleted behind our back (by hand): write it again, from now.
      this.unstored.add(schedule.name);
      await this.storeDefinitions(store);
      return now;
    }
    const last = Number(rows[0].last_tick);
    const { cron, timezone } = schedule;
    const missedUpTo = Math.min(now, this.since - 1);
    const missed =
      schedule.catchUp === "all"
        ? ticksBetween(cron, timezone, last, missedUpTo, CATCH_UP_LIMIT)
        : schedule.catchUp === "latest"
          ? ticksBetween(cron, timezone, last, missedUpTo, 1)
          : [];
    const live = ticksBetween(cron, timezone, Math.max(last, this.since - 1), now, CATCH_UP_LIMIT);
    const due = [...missed, ...live].slice(-CATCH_UP_LIMIT);
    for (const tick of due) await this.fire(schedule, tick);
    const latest = ticksBetween(cron, timezone, last, now, 1)[0];
    if (latest === undefined) return last;
    // Compare-and-set: only forward, and only from the value read; a peer that moved it first wins.
    await store.commit(null, [{ type: "update", table: "cairn_schedules", where: { name: schedule.name, last_tick: last }, set: { last_tick: latest } }]);
    return latest;
  }

  private async fire(schedule: Schedule, tick: number): Promise<void> {
    try {
      await schedule.workflow.start(schedule.input, { id: tickRunId(schedule.name, tick) });
    } catch (error) {
      // A refusal of this tick's run (its input fails the workflow's schema, or the id belongs to a
      // run of another workflow) would be refused again: report it and pass the tick over.
      if (error instanceof InvalidInputError || error instanceof InvalidSpecError) {
        this.onError(error);
        return;
      }
      throw error;
    }
  }
}

import { CronExpressionParser, type CronExpression } from "cron-parser";

/**
 * Tick arithmetic on top of `cron-parser` (5-field `m h dom mon dow`, or 6 with seconds first, and
 * its `@hourly`-style aliases), in the schedule's time zone. Times are epoch milliseconds from the
 * runtime's Clock, so a ManualClock drives schedules in tests.
 */

export function parseCron(cron: string, timezone: string, from: number): CronExpression {
  return CronExpressionParser.parse(cron, { currentDate: new Date(from), tz: timezone });
}

/** The first tick strictly after `after`. */
export function nextTick(cron: string, timezone: string, after: number): number {
  return parseCron(cron, timezone, after).next().getTime();
}

/**
 * The ticks in (`after`, `upTo`], oldest first, at most `limit` of them — the most recent ones when
 * there are more: walked backwards from `upTo`, so a schedule that fires every second and was down
 * for a year costs `limit` steps, not 31 million.
 */
export function ticksBetween(cron: string, timezone: string, after: number, upTo: number, limit: number): number[] {
  if (upTo <= after || limit <= 0) return [];
  // prev() is strictly before currentDate: start one millisecond past `upTo` so a tick at `upTo` counts.
  const expression = parseCron(cron, timezone, upTo + 1);
  const ticks: number[] = [];
  while (ticks.length < limit) {
    const tick = expression.prev().getTime();
    if (tick <= after) break;
    ticks.push(tick);
  }
  return ticks.reverse();
}

import { nextTick } from "../../scheduler/cron/ticks.js";
import { positionals } from "../args.js";
import type { Command } from "../command.js";
import { withReadStore } from "../database.js";
import { formatTime, print, printJsonArray, table } from "../output.js";
import { dim } from "../style.js";

interface ScheduleRow {
  name: string;
  cron: string;
  workflow: string;
  timezone: string;
  catch_up: string;
  last_tick: number | string;
  updated_at: number | string;
}

export const schedules: Command = {
  name: "schedules",
  usage: "",
  summary: "cron schedules: expression, workflow, last tick handled, next tick",
  help: [
    "Schedules are declared in code (`cairn.schedule`) and written to cairn_schedules at launch.",
    "Their runs have ids cron:<name>:<tick>: `cairn runs` lists them.",
  ],
  options: {},
  async run({ args, database, json }) {
    positionals(args, [], "schedules");
    const rows = await withReadStore(database, async (store) => {
      // A database no Cairn with schedules has launched on yet has no cairn_schedules table.
      const found = await store.query("SELECT count(*) AS n FROM cairn_layer_migrations WHERE layer = 'cron'");
      if (Number(found.rows[0]?.n) === 0) return [];
      return (await store.query("SELECT name, cron, workflow, timezone, catch_up, last_tick, updated_at FROM cairn_schedules ORDER BY name"))
        .rows as unknown as ScheduleRow[];
    });
    const listed = rows.map((row) => {
      const lastTick = Number(row.last_tick);
      let next: number | null = null;
      try {
        next = nextTick(row.cron, row.timezone, Math.max(lastTick, Date.now()));
      } catch {
        // A definition this version cannot read: shown without a next tick.
      }
      return { name: row.name, cron: row.cron, timezone: row.timezone, workflow: row.workflow, catchUp: row.catch_up, lastTick, nextTick: next };
    });
    if (json)
      return printJsonArray(
        listed.map((s) => ({
          ...s,
          lastTick: new Date(s.lastTick).toISOString(),
          nextTick: s.nextTick === null ? null : new Date(s.nextTick).toISOString(),
        })),
      );
    if (listed.length === 0) return print(dim("no schedules (declare one with cairn.schedule(name, { cron, workflow }))"));
    print(
      table(
        ["NAME", "CRON", "TIMEZONE", "WORKFLOW", "CATCH-UP", "LAST TICK", "NEXT TICK"],
        listed.map((s) => [s.name, s.cron, s.timezone, s.workflow, s.catchUp, formatTime(s.lastTick), formatTime(s.nextTick)]),
      ),
    );
  },
};

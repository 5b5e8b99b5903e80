import type { StoreExtension } from "../../store/extension.js";

/**
 * The cron layer as the store sees it: one table, `cairn_schedules`, one row per declared schedule.
 * The code declares a schedule (`cairn.schedule`); launching writes its definition here, so the
 * schedules are visible in SQL and the CLI, and `last_tick` is where every executor reads which
 * ticks are still due. Its runs are ordinary runs (id `cron:<name>:<tick>`), so nothing here
 * follows a run's fork, cancel, resume or delete.
 */
export const CRON_EXTENSION: StoreExtension = {
  name: "cron",
  migrations: [
    {
      version: 1,
      name: "schedules",
      statements: [
        `CREATE TABLE cairn_schedules (
          name TEXT PRIMARY KEY,
          cron TEXT NOT NULL,
          workflow TEXT NOT NULL,
          input TEXT,
          timezone TEXT NOT NULL,
          catch_up TEXT NOT NULL,
          -- The latest tick (epoch ms) fired or passed over; ticks after it are due. Set to the time
          -- the schedule was first stored, so a new schedule never fires ticks from before it existed.
          last_tick BIGINT NOT NULL,
          created_at BIGINT NOT NULL,
          updated_at BIGINT NOT NULL
        )`,
      ],
    },
  ],
  tables: ["cairn_schedules"],
  stepKinds: [],
  hooks: {},
};

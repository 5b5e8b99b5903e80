export { CronScheduler, type CronHost } from "./cron-scheduler.js";
export { CRON_EXTENSION } from "./cron-extension.js";
export { CATCH_UP_LIMIT, CATCH_UP_POLICIES, tickRunId, validateSchedule, type CatchUp, type Schedule, type ScheduleSpec } from "./schedule-spec.js";

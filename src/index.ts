export { Cairn } from "./cairn.js";
export type { CairnOptions, ForkOptions, SendOptions } from "./scheduler/runtime.js";
export type { CatchUp, ScheduleSpec } from "./scheduler/cron/index.js";
export type { RetentionOptions } from "./scheduler/retention-policy.js";
export type { DeletedRuns, FinishedStatus, RunDeleteFilter } from "./store/retention.js";
export { MAX_NAME_LENGTH } from "./engine/names.js";
export { Workflow, type StartOptions, type WorkflowOptions } from "./engine/workflow.js";
export { RunHandle, type RunStatusInfo } from "./engine/run-handle.js";
export type { BackoffOptions, ChildHandle, ChildOptions, ChildWorkflow, RecvOptions, StepCall, StepOptions, WorkflowContext } from "./engine/context.js";
export { systemClock, type Clock } from "./engine/clock.js";
export type { StandardSchemaV1 } from "./engine/standard-schema.js";
export type { QueryResult, RunStatus, SqlClient, StepKind, StepStatus } from "./store/store.js";
export {
  AiSdkUnavailableError,
  ApprovalDeniedError,
  BudgetExceededError,
  CairnError,
  CancelledError,
  InvalidInputError,
  InvalidSpecError,
  NonDeterminismError,
  NotACairnDatabaseError,
  PermissionDeniedError,
  PoisonRunError,
  RetryableError,
  RunNotFoundError,
  TerminalError,
  TimeoutError,
  UnserializableError,
  type CairnErrorCode,
} from "./errors.js";
export { registerErrorClass, type ErrorClass, type ErrorClassOptions } from "./error-registry.js";

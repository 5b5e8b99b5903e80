export { Cairn } from "./cairn.js";
export type { UiOptions, UiServer } from "./ui/host.js";
export type { CairnOptions, ForkOptions, SendOptions } from "./scheduler/runtime.js";
export type { CatchUp, ScheduleSpec } from "./scheduler/cron/index.js";
export type { RetentionOptions } from "./scheduler/retention-policy.js";
export type { DeletedRuns, FinishedStatus, RunDeleteFilter } from "./store/retention.js";
export { MAX_NAME_LENGTH } from "./engine/names.js";
export { Workflow, type StartOptions, type WorkflowOptions } from "./engine/workflow.js";
export { RunHandle, type RunStatusInfo } from "./engine/run-handle.js";
export type { BackoffOptions, ChildHandle, ChildOptions, ChildWorkflow, RecvOptions, StepCall, StepOptions, WorkflowContext } from "./engine/context.js";
export {
  SHUTDOWN_TOPIC,
  type ChildCancelOptions,
  type ChildExit,
  type SelectBranch,
  type SelectBranches,
  type SelectKey,
  type Selected,
} from "./engine/context.js";
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
  IsolatedStepCrashedError,
  type IsolatedCrashReason,
  NonDeterminismError,
  NotACairnDatabaseError,
  PermissionDeniedError,
  PoisonRunError,
  SupervisorShutdownError,
  RetryableError,
  RunNotFoundError,
  TerminalError,
  TimeoutError,
  UnserializableError,
  type CairnErrorCode,
} from "./errors.js";
export { registerErrorClass, type ErrorClass, type ErrorClassOptions } from "./error-registry.js";
export {
  isolated,
  type IsolatedCall,
  type IsolatedFunction,
  type IsolatedStep,
  type IsolatedToolExecute,
  type IsolationOptions,
} from "./engine/isolation/isolated.js";
export type { IsolationPoolOptions } from "./engine/isolation/pool.js";
export type { BackoffSpec, ChildSpec, RestartType, Shutdown, Strategy, SupervisorSpec, StartChildOptions, Supervisors } from "./supervision/index.js";

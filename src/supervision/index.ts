export { SUPERVISION_EXTENSION } from "./schema.js";
export { supervisorBody, CONTROL_TOPIC, exitReason, abnormal } from "./supervisor.js";
export { Supervisors, type SupervisorsHost, type StartChildOptions } from "./supervisors.js";
export {
  validateSupervisorSpec,
  DEFAULT_INTENSITY,
  DEFAULT_PERIOD_MS,
  DEFAULT_SHUTDOWN_MS,
  type BackoffSpec,
  type ChildSpec,
  type ResolvedSpec,
  type RestartType,
  type Shutdown,
  type Strategy,
  type SupervisorSpec,
} from "./spec.js";

export { idempotencyKey } from "./idempotency.js";
export type { Agent, AgentInput, AgentOutput, AgentSpec } from "./agent.js";
export type { AgentContext } from "./agent-context.js";
export type { Budget } from "./budget.js";
export type { ApprovalDecision, Permission, PermissionDecision, Permissions } from "./durable-tools.js";
export type { PendingApproval } from "./approvals.js";
export type { Pricing } from "./pricing.js";
export type { RecordedModelOptions } from "./recorded-model.js";
export { startMockLlm } from "./mock-llm/server.js";

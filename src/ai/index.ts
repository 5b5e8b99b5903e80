import { sdk } from "./sdk.js";

// `cairn/ai` is the AI SDK integration: without a supported AI SDK installed, importing it throws
// an AiSdkUnavailableError that names the versions it needs.
sdk();
export { AiSdkUnavailableError } from "../errors.js";
export { idempotencyKey } from "./idempotency.js";
export { toolContext } from "./tool-context.js";
export type { Agent, AgentInput, AgentOutput, AgentSpec, AgentToolCall, AgentToolResult, LoopSettings } from "./agent.js";
export type { CairnAgentOptions } from "./tool-loop-agent.js";
export type { ModelBudgetOptions } from "./model-budget.js";
export type { AgentContext } from "./agent-context.js";
export type { Artifact, ArtifactRef, Artifacts, PutOptions } from "./artifacts.js";
export type { Memory, MemoryEntry } from "./memory.js";
export type { Budget } from "./budget.js";
export type { ApprovalDecision, Permission, PermissionDecision, Permissions } from "./durable-tools.js";
export type { PendingApproval } from "./approvals.js";
export type { Pricing } from "./pricing.js";
export type { RecordedModelOptions } from "./recorded-model.js";
export type { StreamChunk, StreamChunkKind } from "./stream-chunks.js";

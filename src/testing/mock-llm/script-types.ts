/** The shape of a mock-LLM script (its grammar and meaning: script.ts), apart so that the built-in scripts can name it without a circle. */

export type MessageRole = "system" | "user" | "assistant" | "tool";

export interface MockMatch {
  lastRole?: MessageRole;
  contains?: string;
  promptContains?: string;
  promptMatches?: string;
  turn?: number;
  model?: string;
  hasToolResultFor?: string;
}

export interface MockToolCall {
  name: string;
  arguments: Record<string, unknown>;
  id?: string;
}

export interface MockUsage {
  promptTokens?: number;
  completionTokens?: number;
}

export interface MockReply {
  content?: string;
  toolCalls?: MockToolCall[];
  usage?: MockUsage;
}

export interface MockFault {
  status?: number;
  delayMs?: number;
  malformed?: boolean;
  times?: number;
}

export interface MockRule {
  match?: MockMatch;
  reply?: MockReply;
  fault?: MockFault;
}

export interface MockScript {
  latencyMs?: number;
  rules: MockRule[];
  default?: MockReply;
}

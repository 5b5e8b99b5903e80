export { ManualClock } from "./manual-clock.js";
// The mock LLM: a deterministic OpenAI-compatible server for tests and demos (also `cairn mock-llm`).
export { startMockLlm, type LoggedRequest, type MockLlm, type MockLlmOptions, type ReplySummary } from "./mock-llm/server.js";
export type { MockScript } from "./mock-llm/script.js";

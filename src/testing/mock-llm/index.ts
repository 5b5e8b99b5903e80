export { startMockLlm, type LoggedRequest, type MockLlm, type MockLlmOptions, type ReplySummary } from "./server.js";
export {
  loadMockScript,
  parseMockScript,
  type MessageRole,
  type MockFault,
  type MockMatch,
  type MockReply,
  type MockRule,
  type MockScript,
  type MockToolCall,
  type MockUsage,
} from "./script.js";
export { BUILTIN_SCRIPTS, REFUND_SCRIPT } from "./builtin-scripts.js";

/**
 * Isolated steps: a step or a tool run in a separate process from a small warm pool, so that what
 * kills a process (an infinite loop, an out-of-memory, `process.exit`, an exception thrown
 * asynchronously, a native crash) fails that step alone. docs/isolation.md has the design.
 */
export {
  isolated,
  isolatedToolTarget,
  type IsolatedCall,
  type IsolatedExport,
  type IsolatedFunction,
  type IsolatedStep,
  type IsolatedToolExecute,
  type IsolationOptions,
} from "./isolated.js";
export { IsolationPool, type IsolationPoolOptions } from "./pool.js";
export { isolatedExecute, validateIsolation } from "./run-isolated.js";

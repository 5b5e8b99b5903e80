import type { ToolExecuteOptions } from "./sdk-version.js";
import { CairnError } from "../errors.js";
import type { AgentContext } from "./agent-context.js";

/** Where a durable tool call hands the run's context to the tool's `execute` options. */
export const TOOL_CONTEXT = Symbol.for("cairn.toolContext");

/**
 * The run's agent context inside a tool's `execute(input, options)`: `toolContext(options).memory`,
 * `.artifacts`, `.step(...)` — for tools of `cairn.agent` (which has no `ctx` of its own to close
 * over) and of `ctx.tools`.
 */
export function toolContext(options: ToolExecuteOptions | undefined): AgentContext {
  const ctx = (options as { [TOOL_CONTEXT]?: AgentContext } | undefined)?.[TOOL_CONTEXT];
  if (ctx === undefined) {
    throw new CairnError(
      "toolContext(options) needs the options a Cairn agent passes to a tool's execute — call it inside a tool run by cairn.agent or ctx.tools",
    );
  }
  return ctx;
}

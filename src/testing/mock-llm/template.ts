/** The `{{placeholder}}` substitution of a script's replies (the placeholders are listed in script.ts). */

import type { Conversation, ToolResult } from "./conversation.js";

type Placeholder =
  | { kind: "prompt" }
  | { kind: "promptNumber" }
  | { kind: "turn" }
  | { kind: "lastToolResult"; path: string[] }
  | { kind: "toolResult"; tool: string; path: string[] };

/** A placeholder the request cannot fill; the server answers HTTP 400 with this message. */
export class PlaceholderError extends Error {
  override readonly name = "PlaceholderError";
}

const PLACEHOLDER = /\{\{([^{}]*)\}\}/g;
const WHOLE = /^\{\{([^{}]*)\}\}$/;
const KNOWN = "{{prompt}}, {{promptNumber}}, {{turn}}, {{lastToolResult[.field]}} or {{toolResult.NAME[.field]}}";

/** Why `text` holds a placeholder that does not exist, or undefined if it is fine. */
export function checkTemplate(text: string): string | undefined {
  for (const [whole, expression] of text.matchAll(PLACEHOLDER)) {
    if (parse(expression!) === undefined) return `unknown placeholder ${whole}; use ${KNOWN}`;
  }
  return undefined;
}

/** `text` with every placeholder replaced by its value as text. */
export function renderText(text: string, conversation: Conversation): string {
  return text.replace(PLACEHOLDER, (whole, expression: string) => {
    const value = resolve(whole, expression, conversation);
    return typeof value === "string" ? value : JSON.stringify(value);
  });
}

/**
 * Tool-call arguments with placeholders filled in: a string that is exactly one placeholder becomes
 * the value itself (a number stays a number), other strings are rendered as text.
 */
export function renderArguments(value: unknown, conversation: Conversation): unknown {
  if (typeof value === "string") {
    const whole = WHOLE.exec(value);
    return whole === null ? renderText(value, conversation) : resolve(value, whole[1]!, conversation);
  }
  if (Array.isArray(value)) return value.map((item) => renderArguments(item, conversation));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, renderArguments(item, conversation)]));
  }
  return value;
}

function parse(expression: string): Placeholder | undefined {
  const [head, ...path] = expression.trim().split(".");
  if (path.some((segment) => segment === "")) return undefined;
  switch (head) {
    case "prompt":
    case "promptNumber":
    case "turn":
      return path.length === 0 ? { kind: head } : undefined;
    case "lastToolResult":
      return { kind: "lastToolResult", path };
    case "toolResult": {
      const [tool, ...rest] = path;
      return tool === undefined ? undefined : { kind: "toolResult", tool, path: rest };
    }
    default:
      return undefined;
  }
}

function resolve(whole: string, expression: string, conversation: Conversation): unknown {
  const placeholder = parse(expression);
  // The script was validated when loaded, so this is a script built around parseMockScript.
  if (placeholder === undefined) throw new PlaceholderError(`unknown placeholder ${whole}`);
  switch (placeholder.kind) {
    case "prompt":
      return conversation.prompt;
    case "turn":
      return conversation.turn;
    case "promptNumber": {
      const digits = /\d+/.exec(conversation.prompt)?.[0];
      if (digits === undefined) throw new PlaceholderError(`${whole}: the last user message holds no number: ${JSON.stringify(conversation.prompt)}`);
      const number = Number(digits);
      return Number.isSafeInteger(number) ? number : digits;
    }
    case "lastToolResult": {
      const result = conversation.toolResults.at(-1);
      if (result === undefined) throw new PlaceholderError(`${whole}: the request holds no tool result`);
      return field(whole, result, placeholder.path);
    }
    case "toolResult": {
      const result = [...conversation.toolResults].reverse().find((r) => r.toolName === placeholder.tool);
      if (result === undefined) throw new PlaceholderError(`${whole}: the request holds no result of tool ${placeholder.tool}`);
      return field(whole, result, placeholder.path);
    }
  }
}

function field(whole: string, result: ToolResult, path: readonly string[]): unknown {
  if (path.length === 0) return result.content;
  let value: unknown;
  try {
    value = JSON.parse(result.content) as unknown;
  } catch {
    throw new PlaceholderError(`${whole}: the tool result is not JSON: ${JSON.stringify(result.content.slice(0, 80))}`);
  }
  for (const segment of path) {
    if (value === null || typeof value !== "object" || !Object.hasOwn(value, segment)) {
      throw new PlaceholderError(`${whole}: the tool result has no field ${path.join(".")}: ${result.content.slice(0, 80)}`);
    }
    value = (value as Record<string, unknown>)[segment];
  }
  return value;
}

/** The facts about a chat-completions request that a script's rules and placeholders read. */

/** One message as an OpenAI-compatible client sends it (only the fields the mock reads). */
export interface WireMessage {
  role: string;
  /** A string, or an array of parts (`{ type: "text", text }`, images, ...), or null. */
  content?: unknown;
  tool_calls?: { id?: string; function?: { name?: string; arguments?: string } }[];
  tool_call_id?: string;
  /** Some clients name the tool on a tool message; most leave it to `tool_call_id`. */
  name?: string;
}

export interface ToolResult {
  /** Resolved through the assistant message that made the call; undefined if nothing names it. */
  toolName: string | undefined;
  content: string;
}

export interface Conversation {
  model: string;
  messages: readonly WireMessage[];
  lastRole: string | undefined;
  /** The last message's text; for a tool message, the tool's result. */
  lastText: string;
  /** The last user message's text ("" if there is none). */
  prompt: string;
  /** Assistant messages already in the request. */
  turn: number;
  /** Every tool result, in order. */
  toolResults: readonly ToolResult[];
  /** The tool results after the last assistant message: the ones this request answers. */
  newToolResults: readonly ToolResult[];
  /** Characters of every message's text and tool-call arguments: the basis of prompt tokens. */
  promptChars: number;
}

export function conversationOf(model: string, messages: readonly WireMessage[]): Conversation {
  const toolNames = new Map<string, string>();
  const toolResults: ToolResult[] = [];
  let newToolResults: ToolResult[] = [];
  let turn = 0;
  let prompt = "";
  let promptChars = 0;
  for (const message of messages) {
    const text = textOf(message.content);
    promptChars += text.length;
    if (message.role === "user") prompt = text;
    if (message.role === "assistant") {
      turn++;
      newToolResults = [];
      for (const call of message.tool_calls ?? []) {
        promptChars += call.function?.arguments?.length ?? 0;
        if (call.id !== undefined && call.function?.name !== undefined) toolNames.set(call.id, call.function.name);
      }
    }
    if (message.role === "tool") {
      const toolName = message.name ?? (message.tool_call_id === undefined ? undefined : toolNames.get(message.tool_call_id));
      const result = { toolName, content: text };
      toolResults.push(result);
      newToolResults.push(result);
    }
  }
  const last = messages.at(-1);
  return {
    model,
    messages,
    lastRole: last?.role,
    lastText: last === undefined ? "" : textOf(last.content),
    prompt,
    turn,
    toolResults,
    newToolResults,
    promptChars,
  };
}

/** A message's text: the string itself, or its text parts joined. */
export function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part: unknown) => {
      const text = (part as { text?: unknown } | null)?.text;
      return typeof text === "string" ? text : "";
    })
    .join("");
}

import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3Content,
  LanguageModelV3GenerateResult,
  LanguageModelV3StreamPart,
} from "@ai-sdk/provider";
import type { Tool, ToolLoopAgent, wrapLanguageModel } from "ai";

/**
 * The one place that knows the AI SDK has two supported majors: `ai@6` (`@ai-sdk/provider@3`, models
 * of specification "v3") and `ai@7` (`@ai-sdk/provider@4`, specification "v4"; it still takes v3
 * models and adapts them itself). Everything else in src/ai is written against the v3 shapes, which
 * are what the journal stores: a model call's record (content, stream parts, prompt) is the same
 * whichever major wrote it, so a run started under one reads, and replays, under the other.
 *
 * The types are derived from the installed `ai`, so src type-checks against either major; the
 * conversions below are by the model's own `specificationVersion`, not by which `ai` is installed
 * (an ai@7 application may hand Cairn a v3 model: it gets a v3 model back, and ai@7 adapts it).
 *
 * v4 differs from v3, for what Cairn records, only in file data (tagged: `{ type: "data" | "url" |
 * "reference" | "text", ... }` instead of a bare string/bytes), tool-result file outputs, the parts
 * v3 has no form for (`custom`, `reasoning-file`, citations, the `interrupted` finish reason; kept
 * as they are, so a record holding them replays under ai@7 only) and `ping` stream parts (keep-alives,
 * not recorded).
 */

/** The installed `ai`'s own language model: LanguageModelV3 under ai@6, LanguageModelV4 under ai@7. */
export type SdkLanguageModel = ReturnType<typeof wrapLanguageModel>;

/** A language model Cairn records: specification v3 (both majors), or the installed major's own. */
export type CairnLanguageModel = LanguageModelV3 | SdkLanguageModel;

/** The options a tool's `execute` gets from the installed `ai` (generic over a context in ai@7). */
export type ToolExecuteOptions = Parameters<NonNullable<Tool["execute"]>>[1];

/** A `ToolLoopAgent` of the installed `ai`, whatever its type parameters. */
export type AnyToolLoopAgent = ToolLoopAgent<never, any, any>;

/** The settings a `ToolLoopAgent` is constructed with (ai@7 has a context type parameter ai@6 has not). */
export type SdkAgentSettings = ConstructorParameters<typeof ToolLoopAgent>[0];

/** The specification a model implements ("v3" or "v4"). */
export type ModelSpec = "v3" | "v4";

/** The specification of a model Cairn was given: "v4", or else the v3 Cairn has always taken. */
export function specOf(model: { specificationVersion?: unknown }): ModelSpec {
  return model.specificationVersion === "v4" ? "v4" : "v3";
}

type Loose = Record<string, unknown>;

/** v4 file data (tagged) as v3 has it: bytes or base64 for data, a URL for a url; others unchanged. */
function fileDataToV3(data: unknown): unknown {
  if (data === null || typeof data !== "object" || data instanceof Uint8Array || data instanceof URL) return data;
  const tagged = data as Loose;
  if (tagged.type === "data") return tagged.data;
  if (tagged.type === "url") return tagged.url;
  return data;
}

/** v3 file data as v4 tags it. */
function fileDataToV4(data: unknown): unknown {
  if (data instanceof URL) return { type: "url", url: data };
  if (typeof data === "string" || data instanceof Uint8Array) return { type: "data", data };
  return data;
}

function base64Of(data: unknown): string {
  return typeof data === "string" ? data : Buffer.from(data as Uint8Array).toString("base64");
}

/** A v4 tool result's output as v3 has it (file outputs are `file-data` / `file-url` / `file-id` there). */
function toolOutputToV3(output: unknown): unknown {
  const o = output as Loose | null;
  if (o === null || typeof o !== "object" || o.type !== "content" || !Array.isArray(o.value)) return output;
  return {
    ...o,
    value: o.value.map((part: Loose) => {
      if (part.type !== "file") return part;
      const data = part.data as Loose;
      const options = part.providerOptions === undefined ? {} : { providerOptions: part.providerOptions };
      switch (data?.type) {
        case "data":
          return {
            type: "file-data",
            data: base64Of(data.data),
            mediaType: part.mediaType,
            ...(part.filename === undefined ? {} : { filename: part.filename }),
            ...options,
          };
        case "url":
          return { type: "file-url", url: String(data.url), ...options };
        case "reference":
          return { type: "file-id", fileId: data.reference, ...options };
        default:
          return part;
      }
    }),
  };
}

/** A call's options in the recorded (v3) form: the prompt is what is fingerprinted and stored. */
export function canonicalCallOptions(params: unknown, spec: ModelSpec): LanguageModelV3CallOptions {
  const options = params as LanguageModelV3CallOptions;
  if (spec === "v3") return options;
  const prompt = (options.prompt as unknown as Loose[]).map((message) => {
    if (message.role === "system" || !Array.isArray(message.content)) return message;
    return {
      ...message,
      content: (message.content as Loose[]).map((part) =>
        part.type === "file"
          ? { ...part, data: fileDataToV3(part.data) }
          : part.type === "tool-result"
            ? { ...part, output: toolOutputToV3(part.output) }
            : part,
      ),
    };
  });
  return { ...options, prompt: prompt as unknown as LanguageModelV3CallOptions["prompt"] };
}

function contentToV3(part: Loose): Loose {
  return part.type === "file" || part.type === "reasoning-file" ? { ...part, data: fileDataToV3(part.data) } : part;
}

function contentToV4(part: Loose): Loose {
  return part.type === "file" || part.type === "reasoning-file" ? { ...part, data: fileDataToV4(part.data) } : part;
}

/** A generate result in the recorded (v3) form. */
export function canonicalGenerateResult(result: unknown, spec: ModelSpec): LanguageModelV3GenerateResult {
  const r = result as LanguageModelV3GenerateResult;
  if (spec === "v3") return r;
  return { ...r, content: (r.content as unknown as Loose[]).map(contentToV3) as unknown as LanguageModelV3Content[] };
}

/** A generate result (recorded, v3 form) as a model of `spec` returns it. */
export function sdkGenerateResult(result: LanguageModelV3GenerateResult, spec: ModelSpec): unknown {
  if (spec === "v3") return result;
  return { ...result, content: (result.content as unknown as Loose[]).map(contentToV4) };
}

/** A stream part in the recorded (v3) form; null for parts that are not recorded (v4 keep-alive pings). */
export function canonicalStreamPart(part: unknown, spec: ModelSpec): LanguageModelV3StreamPart | null {
  const p = part as Loose;
  if (spec === "v3") return part as LanguageModelV3StreamPart;
  if (p.type === "ping") return null;
  return contentToV3(p) as unknown as LanguageModelV3StreamPart;
}

/** A stream part (recorded, v3 form) as a model of `spec` streams it. */
export function sdkStreamPart(part: LanguageModelV3StreamPart, spec: ModelSpec): unknown {
  return spec === "v3" ? part : contentToV4(part as unknown as Loose);
}

/**
 * What a tool's `needsApproval` function is asked with: the tool call's context is
 * `experimental_context` in ai@6 and `context` in ai@7; both are passed, each major reads its own.
 */
export function needsApprovalOptions(options: ToolExecuteOptions): { toolCallId: string; messages: unknown[] } {
  const o = options as unknown as Loose;
  return { toolCallId: options.toolCallId, messages: options.messages, experimental_context: o.experimental_context, context: o.context } as {
    toolCallId: string;
    messages: unknown[];
  };
}

/**
 * The response messages of every step of a loop (what an agent's output returns): ai@7 has them as
 * `responseMessages` (its `response.messages` is the last step's only), ai@6 as `response.messages`.
 */
export function allResponseMessages<T>(result: { response: { messages?: T[] } }): T[] {
  return (result as { responseMessages?: T[] }).responseMessages ?? result.response.messages ?? [];
}

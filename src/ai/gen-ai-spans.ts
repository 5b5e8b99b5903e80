import type { LanguageModelV3, LanguageModelV3CallOptions } from "@ai-sdk/provider";
import type { Outcome } from "../engine/attempts.js";
import type { OperationTraceSpec, TraceAttributes } from "../engine/tracing.js";
import type { GenerateRecord, StreamRecord } from "./model-response.js";

/**
 * What a model call's and a tool call's spans say, in the OpenTelemetry semantic conventions for
 * generative AI (gen_ai.*): the engine makes the span when the call acts live (never when its
 * record is replayed) and a tracer records it; this only describes it. Prompts and answers are not
 * put on spans — they are rows (`cairn_model_calls`, `cairn_payloads`) a trace links to by run id
 * and seq.
 */

/** A provider as the conventions name it: "openai.chat" → "openai". */
function providerName(provider: string): string {
  const dot = provider.indexOf(".");
  return dot === -1 ? provider : provider.slice(0, dot);
}

function requestAttributes(model: LanguageModelV3, params: LanguageModelV3CallOptions, streamed: boolean): TraceAttributes {
  const provider = providerName(model.provider);
  return {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": provider,
    // The name before semantic conventions 1.37, which many backends still read.
    "gen_ai.system": provider,
    "gen_ai.request.model": model.modelId,
    "gen_ai.request.temperature": params.temperature,
    "gen_ai.request.max_tokens": params.maxOutputTokens,
    "gen_ai.request.top_p": params.topP,
    "gen_ai.request.top_k": params.topK,
    "gen_ai.request.stop_sequences": params.stopSequences,
    "cairn.model.streamed": streamed,
  };
}

interface Answer {
  responseModel: string | undefined;
  responseId: string | undefined;
  inputTokens: number | undefined;
  outputTokens: number | undefined;
  finishReason: string | undefined;
}

function answerAttributes(answer: Answer): TraceAttributes {
  return {
    "gen_ai.response.model": answer.responseModel,
    "gen_ai.response.id": answer.responseId,
    "gen_ai.usage.input_tokens": answer.inputTokens,
    "gen_ai.usage.output_tokens": answer.outputTokens,
    "gen_ai.response.finish_reasons": answer.finishReason === undefined ? undefined : [answer.finishReason],
  };
}

/** A `generateText` model call (doGenerate). */
export function generateSpan(model: LanguageModelV3, params: LanguageModelV3CallOptions): OperationTraceSpec<Outcome<GenerateRecord>> {
  return {
    spanName: `chat ${model.modelId}`,
    client: true,
    // Read only when a tracer records the span: untraced calls (most) never build them.
    get attributes() {
      return requestAttributes(model, params, false);
    },
    outcome: (outcome) =>
      outcome.ok
        ? answerAttributes({
            responseModel: outcome.value.response?.modelId,
            responseId: outcome.value.response?.id,
            inputTokens: outcome.value.usage.inputTokens.total,
            outputTokens: outcome.value.usage.outputTokens.total,
            finishReason: outcome.value.finishReason.unified,
          })
        : undefined,
  };
}

/** A `streamText` model call (doStream): the answer is read from the recorded parts. */
export function streamSpan(model: LanguageModelV3, params: LanguageModelV3CallOptions): OperationTraceSpec<Outcome<StreamRecord>> {
  return {
    spanName: `chat ${model.modelId}`,
    client: true,
    // Read only when a tracer records the span: untraced calls (most) never build them.
    get attributes() {
      return requestAttributes(model, params, true);
    },
    outcome: (outcome) => {
      if (!outcome.ok) return undefined;
      let answer: Answer = { responseModel: undefined, responseId: undefined, inputTokens: undefined, outputTokens: undefined, finishReason: undefined };
      for (const part of outcome.value.parts) {
        if (part.type === "response-metadata") answer = { ...answer, responseModel: part.modelId, responseId: part.id };
        if (part.type === "finish") {
          answer = {
            ...answer,
            inputTokens: part.usage.inputTokens.total,
            outputTokens: part.usage.outputTokens.total,
            finishReason: part.finishReason.unified,
          };
        }
      }
      return answerAttributes(answer);
    },
  };
}

/** A durable tool's execution. */
export function toolSpan(name: string, toolCallId: string, status: "succeeded" | "denied"): OperationTraceSpec<Outcome<unknown>> {
  return {
    spanName: `execute_tool ${name}`,
    attributes: {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": name,
      "gen_ai.tool.call.id": toolCallId,
      "gen_ai.tool.type": "function",
      // "denied": the tool did not run; what the model is told instead is the outcome.
      "cairn.tool.status": status,
    },
  };
}

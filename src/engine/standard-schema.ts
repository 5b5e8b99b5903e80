import { InvalidInputError } from "../errors.js";

/** The Standard Schema v1 interface (zod, valibot, arktype, ... implement it). */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly "~standard": {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => StandardResult<Output> | Promise<StandardResult<Output>>;
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
  };
}

type StandardResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | { readonly issues: ReadonlyArray<{ readonly message: string; readonly path?: ReadonlyArray<PropertyKey | { key: PropertyKey }> }> };

/** Validates `value`; returns the schema's output or throws InvalidInputError listing every issue. */
export async function validateInput<T>(schema: StandardSchemaV1<unknown, T>, value: unknown, what: string): Promise<T> {
  const result = await schema["~standard"].validate(value);
  if (result.issues === undefined) return result.value;
  const issues = result.issues.map((issue) => {
    const path = (issue.path ?? []).map((part) => String(typeof part === "object" ? part.key : part)).join(".");
    return path === "" ? issue.message : `${path}: ${issue.message}`;
  });
  throw new InvalidInputError(`${what} is invalid — ${issues.join("; ")}. Nothing was stored.`);
}

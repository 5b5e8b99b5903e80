/**
 * PostgreSQL array literals for array parameters (`$1::text[]`, `int[]`, `bigint[]`), made in one
 * `join`: the text pg makes for an array parameter (`utils.arrayString`), with less garbage.
 *
 * pg appends element by element — an intermediate string per comma, per element and per quote —
 * and a wake-up's fenced batches send a dozen arrays of 512 elements: ~2.6 KB of short-lived
 * strings per woken run, a tenth of all it allocates. Here an element that needs no quotes is
 * used as it is (a number, a run's id, a status), any other string is quoted and escaped as pg
 * does, and `null`/`undefined` is `NULL`. Only arrays of strings, numbers, booleans and nulls are
 * made here; any other array (nested, of Dates, Buffers or objects) is left to pg, which returns
 * null from `arrayLiteral`.
 *
 * The literal means what pg's text means only where the parameter is array-typed (`$1::text[]`);
 * bound to a scalar `text` or `json` parameter, a JS array would now arrive as `{a}` instead of
 * `{"a"}`. Every array Cairn binds is cast to an array type.
 */
export function arrayLiteral(values: readonly unknown[]): string | null {
  const parts = new Array<string>(values.length);
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    switch (typeof value) {
      case "string":
        parts[i] = BARE.test(value) && !NULL_WORD.test(value) ? value : quoted(value);
        break;
      case "number":
      case "boolean":
        // As pg: its text (NaN, Infinity and 1e+21 need no quotes either).
        parts[i] = String(value);
        break;
      case "undefined":
        parts[i] = "NULL";
        break;
      default:
        if (value !== null) return null;
        parts[i] = "NULL";
    }
  }
  return `{${parts.join(",")}}`;
}

/**
 * What an array literal takes unquoted and reads back the same: no quote, backslash, brace, comma
 * or whitespace, and not empty (a bare empty element is a syntax error).
 */
const BARE = /^[A-Za-z0-9_.:+\-]+$/;
/** A bare NULL (in any case) is a null element, not the string: it is quoted. */
const NULL_WORD = /^null$/i;

function quoted(value: string): string {
  return `"${ESCAPED.test(value) ? value.replace(/[\\"]/g, "\\$&") : value}"`;
}

const ESCAPED = /[\\"]/;

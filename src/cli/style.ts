/**
 * Terminal colour, only when stdout is a terminal and NO_COLOR is unset (https://no-color.org);
 * piped output and --json never carry escape codes.
 */
const enabled = process.stdout.isTTY === true && (process.env.NO_COLOR ?? "") === "" && process.env.TERM !== "dumb";

const wrap =
  (open: number, close: number) =>
  (text: string): string =>
    enabled ? `\u001b[${open}m${text}\u001b[${close}m` : text;

export const bold = wrap(1, 22);
export const dim = wrap(2, 22);
export const red = wrap(31, 39);
export const green = wrap(32, 39);
export const yellow = wrap(33, 39);
export const cyan = wrap(36, 39);

/** A run or step status in its colour: green done, red failed, yellow in flight. */
export function status(text: string): string {
  if (text === "succeeded") return green(text);
  if (text === "failed" || text === "cancelled") return red(text);
  return yellow(text);
}

/** The width a string takes on screen (escape codes take none). */
export function visibleLength(text: string): number {
  return [...text.replace(/\u001b\[\d+m/g, "")].length;
}

/**
 * Markers a worker process prints for the process that watches it: one JSON object per stdout
 * line, behind a prefix so anything else the worker prints is told apart. Stdout is a pipe, written
 * synchronously on Linux and macOS, so a marker printed before a SIGKILL has reached the watcher.
 */
export interface MarkerChannel<M> {
  format(marker: M): string;
  /** The marker on a line of output, or undefined for any other line. */
  parse(line: string): M | undefined;
}

export function markerChannel<M>(prefix: string): MarkerChannel<M> {
  return {
    format: (marker) => `${prefix}${JSON.stringify(marker)}`,
    parse(line) {
      if (!line.startsWith(prefix)) return undefined;
      try {
        return JSON.parse(line.slice(prefix.length)) as M;
      } catch {
        return undefined;
      }
    },
  };
}

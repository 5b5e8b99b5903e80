import { InvalidSpecError } from "../errors.js";

/** A fork must make a new run: grafting a journal onto an existing one would corrupt it. */
export function forkIdTaken(id: string): InvalidSpecError {
  return new InvalidSpecError("id", id, "a run with this id already exists; fork to a new id");
}

import { InvalidSpecError } from "../errors.js";

/** A fork must make a new run: grafting a journal onto an existing one would corrupt it. */
export function forkIdTaken(id: string): InvalidSpecError {
  return new InvalidSpecError("id", id, "a run with this id already exists; fork to a new id");
}

/**
 * $1 fork id, $2 original run id, $3 fromSeq: the fork has the events set by the `event` steps it
 * inherits — the value of each key's last inherited set. That value is the step's own output when
 * the step recorded one; otherwise (journals whose event steps record no value) it is the
 * original's current value, taken only when no step at or past `fromSeq` set the key since — a key
 * overwritten after the fork point by such a journal is left out rather than given a later value.
 * Shared by both backends (`$n` placeholders; the SQLite store rewrites them).
 */
export const FORK_EVENTS = `INSERT INTO cairn_events (run_id, key, value, value_hash, updated_at)
  SELECT $1, s.name,
    CASE WHEN s.output IS NULL AND s.output_hash IS NULL THEN e.value ELSE s.output END,
    CASE WHEN s.output IS NULL AND s.output_hash IS NULL THEN e.value_hash ELSE s.output_hash END,
    COALESCE(s.finished_at, s.started_at)
  FROM cairn_steps s
  LEFT JOIN cairn_events e ON e.run_id = $2 AND e.key = s.name
  WHERE s.run_id = $2 AND s.kind = 'event' AND s.status = 'succeeded' AND s.seq < $3
    AND s.seq = (SELECT MAX(l.seq) FROM cairn_steps l
                 WHERE l.run_id = $2 AND l.kind = 'event' AND l.status = 'succeeded' AND l.name = s.name AND l.seq < $3)
    AND (s.output IS NOT NULL OR s.output_hash IS NOT NULL
         OR (e.run_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM cairn_steps a
             WHERE a.run_id = $2 AND a.kind = 'event' AND a.name = s.name AND a.seq >= $3)))`;

// Waiting between attempts of an operation that lost a race or a store call that failed.

/** Exponential backoff with jitter: about base * 2^attempt, capped, scaled by a random 0.5 .. 1.5. */
export function backoffMs(attempt: number, baseMs: number, capMs: number): number {
  return Math.min(capMs, baseMs * 2 ** attempt) * (0.5 + Math.random());
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

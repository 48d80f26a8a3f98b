/** A promise that never rejects (a read begun ahead, maybe never awaited), and its outcome. */
export type Outcome<T> = { value: T } | { error: unknown };

export const settled = <T>(p: Promise<T>): Promise<Outcome<T>> =>
  p.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );

/** The value of an outcome, or its error thrown. */
export const unwrap = <T>(outcome: Outcome<T>): T => {
  if ('error' in outcome) throw outcome.error;
  return outcome.value;
};

// Leases: how a multi-step protocol holds something in the store (a name being created, a table
// being written or dropped, a namespace being dropped) so that others can tell a live holder from
// a dead one. A holder writes `lease_until` into its claim and keeps moving it forward while it
// works; once that instant has passed without a renewal the holder is presumed dead and its claim
// may be taken over (always with a replace-if-unchanged of exactly the stale claim).

export const leaseUntil = (leaseMs: number, now = Date.now()): string => new Date(now + leaseMs).toISOString();

/** Whether a lease has run out; an unreadable instant counts as run out (its holder left no valid claim). */
export function leaseExpired(until: string | undefined, now = Date.now()): boolean {
  const at = until === undefined ? Number.NaN : Date.parse(until);
  return !Number.isFinite(at) || at <= now;
}

/** How often a holder renews: a third of the lease, so two renewals may fail before it runs out. */
export const renewalIntervalMs = (leaseMs: number): number => Math.max(10, Math.floor(leaseMs / 3));

export interface Renewal {
  /** Stops renewing and waits for a renewal under way; the first failed renewal is rethrown. */
  stop(): Promise<void>;
}

/**
 * Renews a lease stamped at `stampedAt` (the instant its `lease_until` was computed, before the put
 * that wrote it) every renewalIntervalMs(leaseMs), each renewal timed from the one before it began,
 * not from when this was called: a slow first put or a slow renewal must not push the next one past
 * the lease's end, where another request may take the claim over from a holder still at work.
 * A renewal that throws ends the renewals (the claim is no longer ours to keep) and its error is
 * reported by stop().
 */
export function keepRenewed(leaseMs: number, renew: () => Promise<void>, stampedAt = Date.now()): Renewal {
  const interval = renewalIntervalMs(leaseMs);
  let running: Promise<void> = Promise.resolve();
  let failure: unknown;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const schedule = (from: number) => {
    timer = setTimeout(
      () => {
        running = (async () => {
          if (stopped) return;
          const began = Date.now();
          try {
            await renew();
          } catch (e) {
            failure = e;
            return;
          }
          if (!stopped) schedule(began);
        })();
      },
      Math.max(0, from + interval - Date.now()),
    );
    timer.unref();
  };
  schedule(stampedAt);
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
      if (failure !== undefined) throw failure;
    },
  };
}

/** Polls `check` with a short backoff until it returns true or `deadline` (epoch ms) passes; returns the last answer. */
export async function pollUntil(check: () => Promise<boolean>, deadline: number): Promise<boolean> {
  let delay = 5;
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, Math.min(delay, Math.max(1, deadline - Date.now()))));
    delay = Math.min(delay * 2, 100);
  }
}

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { keepRenewed } from '../../src/service/coordination/leases.js';

// Renewals are timed from the lease's stamp, so that a slow first put or a slow renewal does not
// leave the lease to run out while its holder works (another request would then take it over).
describe('keepRenewed', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 1_000_000 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('renews a third of a lease after its stamp, not after the slow put that wrote it', async () => {
    const renewedAt: number[] = [];
    const stamped = Date.now();
    // The put of the claim took 250 ms of a 300 ms lease.
    vi.setSystemTime(stamped + 250);
    const renewal = keepRenewed(300, async () => void renewedAt.push(Date.now() - stamped), stamped);
    await vi.advanceTimersByTimeAsync(0);
    expect(renewedAt).toEqual([250]);
    await vi.advanceTimersByTimeAsync(100);
    expect(renewedAt).toEqual([250, 350]);
    await renewal.stop();
    await vi.advanceTimersByTimeAsync(1000);
    expect(renewedAt).toEqual([250, 350]);
  });

  it('times each renewal from when the one before it began, so a slow renewal is followed at once', async () => {
    const began: number[] = [];
    const stamped = Date.now();
    const renewal = keepRenewed(
      300,
      async () => {
        began.push(Date.now() - stamped);
        // The first renewal's put takes 150 ms, longer than the 100 ms between renewals.
        if (began.length === 1) await new Promise((r) => setTimeout(r, 150));
      },
      stamped,
    );
    await vi.advanceTimersByTimeAsync(100);
    expect(began).toEqual([100]);
    // Due at 200, it begins once the first ends, at 250 (a timer of 0 ms waits 1 ms).
    await vi.advanceTimersByTimeAsync(151);
    expect(began).toEqual([100, 251]);
    await vi.advanceTimersByTimeAsync(100);
    expect(began).toEqual([100, 251, 351]);
    await renewal.stop();
  });

  it('stops at the first failed renewal and reports it from stop(), after waiting for a renewal under way', async () => {
    let calls = 0;
    let finish: () => void = () => undefined;
    const renewal = keepRenewed(300, async () => {
      calls++;
      if (calls === 1) await new Promise<void>((r) => (finish = r));
      else throw new Error('the claim was taken over');
    });
    await vi.advanceTimersByTimeAsync(100);
    let stopped = false;
    const stopping = renewal.stop().then(() => (stopped = true));
    await vi.advanceTimersByTimeAsync(0);
    expect(stopped).toBe(false);
    finish();
    await stopping;
    expect(calls).toBe(1);

    const failing = keepRenewed(300, async () => {
      calls++;
      throw new Error('the claim was taken over');
    });
    await vi.advanceTimersByTimeAsync(1000);
    expect(calls).toBe(2);
    await expect(failing.stop()).rejects.toThrow('taken over');
  });
});

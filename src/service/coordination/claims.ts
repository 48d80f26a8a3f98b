import { type ObjectStore, PreconditionFailedError } from '../../store/object-store.js';
import { encodeRecord } from '../catalog/records.js';
import { keepRenewed, leaseExpired, leaseUntil, pollUntil } from './leases.js';

// A claim: the one request that may do something now (create a table's dataset, fork or delete a
// table's branches) holds an object, put create-if-absent. The holder renews the claim's lease
// while it works (a large body on S3 may take long); a claim whose lease ran out was left by a dead
// holder and is taken over by a replace-if-unchanged of exactly that claim. The holder releases
// only its own claim: one it put or renewed less than a lease ago cannot have been taken over
// (its lease has not run out), so it deletes that without a look (as a write lease is released,
// table-fences.ts); past that, only if it still holds exactly its own.

/** When a claim's lease ends; undefined for an unreadable claim, which is then treated as stale. */
function claimLease(body: Buffer): string | undefined {
  try {
    const until = (JSON.parse(body.toString('utf8')) as { lease_until?: unknown }).lease_until;
    return typeof until === 'string' ? until : undefined;
  } catch {
    return undefined;
  }
}

/** How a claim is put. */
export interface ClaimOptions {
  /**
   * Whether the claim must survive a crash of the machine (the default). A claim that matters only
   * while its holder lives (it guards no state a later holder does not check for itself) need
   * not: the machine's crash ends the holder too, and a claim lost with it is no live claim. On a
   * local disk that spares the fsyncs of the file and its directory.
   */
  durable?: boolean;
}

/** Takes the claim `key`; returns its release, or null while another request holds it. */
export async function takeClaim(
  store: ObjectStore,
  key: string,
  requestId: string,
  leaseMs: number,
  options: ClaimOptions = {},
): Promise<(() => Promise<void>) | null> {
  const claim = () => encodeRecord({ request_id: requestId, lease_until: leaseUntil(leaseMs) });
  const put = { durable: options.durable ?? true };
  /** Puts the claim under `condition` and keeps it renewed; returns its release. */
  const hold = async (condition: { ifNoneMatch: '*' } | { ifMatch: string }) => {
    let stampedAt = Date.now();
    let current = (await store.put(key, claim(), condition, put)).etag;
    const renewal = keepRenewed(
      leaseMs,
      async () => {
        const began = Date.now();
        current = (await store.put(key, claim(), { ifMatch: current }, put)).etag;
        stampedAt = began;
      },
      stampedAt,
    );
    return async () => {
      const renewed = await renewal.stop().then(
        () => true,
        () => false,
      );
      // Within the lease of its last stamp the claim is still this one's (see the header): no HEAD.
      if (renewed && (Date.now() - stampedAt < leaseMs || (await store.head(key))?.etag === current)) await store.delete(key);
    };
  };
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      return await hold({ ifNoneMatch: '*' });
    } catch (e) {
      if (!(e instanceof PreconditionFailedError)) throw e;
    }
    const held = await store.get(key);
    if (!held) continue; // released in between: claim again
    if (!leaseExpired(claimLease(held.body))) return null;
    try {
      return await hold({ ifMatch: held.etag });
    } catch (e) {
      if (e instanceof PreconditionFailedError) return null;
      throw e;
    }
  }
  return null;
}

/** As takeClaim, waiting with a short backoff while another request holds the claim, until `deadline` (epoch ms); null if it is still held then. */
export async function awaitClaim(
  store: ObjectStore,
  key: string,
  requestId: string,
  leaseMs: number,
  deadline: number,
  options: ClaimOptions = {},
): Promise<(() => Promise<void>) | null> {
  let release: (() => Promise<void>) | null = null;
  await pollUntil(async () => {
    release = await takeClaim(store, key, requestId, leaseMs, options);
    return release !== null;
  }, deadline);
  return release;
}

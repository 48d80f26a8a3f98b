import { PreconditionFailedError, type ObjectStore } from '../store/object-store.js';
import { CATALOG_DIR, type TableRef, tableDirKey } from './layout.js';
import { encodeRecord } from './records.js';

// Lance alone cannot settle concurrent creators of a dataset: the loser of version 1 rebases its
// create (an overwrite) onto the winner's version and commits it as version 2, silently replacing
// the winner's rows. So every request that creates the dataset of an existing (declared) table
// first takes this claim, a create-if-absent in the table's `_catalog/`; only the holder creates.
// A claim left by a crashed holder is taken over once its lease has run out, by a
// replace-if-unchanged of exactly the stale claim.

const CREATION_CLAIM = 'dataset-create.json';
/** After this a claim is presumed left by a crashed holder (the default transaction lease). */
const CREATION_CLAIM_LEASE_MS = 30_000;

/** When a creation claim was taken; NaN for an unreadable claim, which is then treated as stale. */
function claimTime(body: Buffer): number {
  try {
    return Date.parse(String((JSON.parse(body.toString('utf8')) as { claimed_at?: unknown }).claimed_at));
  } catch {
    return Number.NaN;
  }
}

/** Takes the claim to create a table's dataset; returns its release, or null while another request holds it. */
export async function claimDatasetCreation(store: ObjectStore, ref: TableRef, requestId: string): Promise<(() => Promise<void>) | null> {
  const key = `${tableDirKey(ref)}${CATALOG_DIR}/${CREATION_CLAIM}`;
  const claim = encodeRecord({ request_id: requestId, claimed_at: new Date().toISOString() });
  const release = () => store.delete(key);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await store.put(key, claim, { ifNoneMatch: '*' });
      return release;
    } catch (e) {
      if (!(e instanceof PreconditionFailedError)) throw e;
    }
    const held = await store.get(key);
    if (!held) continue; // released in between: claim again
    const claimedAt = claimTime(held.body);
    if (Number.isFinite(claimedAt) && Date.now() - claimedAt < CREATION_CLAIM_LEASE_MS) return null;
    try {
      await store.put(key, claim, { ifMatch: held.etag });
      return release;
    } catch (e) {
      if (e instanceof PreconditionFailedError) return null;
      throw e;
    }
  }
  return null;
}

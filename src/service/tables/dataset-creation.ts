import type { ObjectStore } from '../../store/object-store.js';
import { creationClaimKey, type TableRef } from '../catalog/layout.js';
import { takeClaim } from '../coordination/claims.js';

// Lance alone cannot settle concurrent creators of a dataset: the loser of version 1 rebases its
// create (an overwrite) onto the winner's version and commits it as version 2, silently replacing
// the winner's rows. So every request that creates the dataset of an existing (declared) table
// first takes this claim (coordination/claims.ts) in the table's `_catalog/`; only the holder creates.

/** Takes the claim to create a table's dataset; returns its release, or null while another request holds it. */
export function claimDatasetCreation(store: ObjectStore, ref: TableRef, requestId: string, leaseMs: number): Promise<(() => Promise<void>) | null> {
  return takeClaim(store, creationClaimKey(ref), requestId, leaseMs);
}

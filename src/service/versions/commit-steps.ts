import { ErrorCode, invalidInput, NamespaceError } from '../../model/errors.js';
import type { CreateTableVersionEntry, TableVersion } from '../../model/versions.js';
import { PreconditionFailedError } from '../../store/object-store.js';
import type { ManifestNamingScheme } from '../../engine/lance-format/manifest-names.js';
import { displayId, requireMainBranch } from '../catalog/catalog.js';
import type { BatchEntry } from '../transactions/transaction-log.js';
import type { CommittedVersion, TableVersions, VersionSidecar } from './dataset-versions.js';

// The steps every commit of a version takes, single (single-commit.ts) or batch (batch-commit.ts).
//
// Invariants:
// - A version is committed by one create-if-absent of its final manifest name, so an
//   acknowledged version is never overwritten and of two writers of one version exactly one wins
//   (the other gets 409 code 14 and Lance rebases).
// - Only version latest + 1 may be created, so the history has no gaps.
// - Only a staged manifest is ever consumed: a staging name under the dataset's `_versions/`
//   holding a Lance manifest of the requested version (TableVersions.stagedKey, readStaged),
//   checked before any reservation, record or marker is written, so a create can never delete a
//   committed manifest, a data file, an index or a record.
// - Every writer of version v, single or batch, first holds v's slot (version-slots.ts).

export const conflict = (message: string) => new NamespaceError(ErrorCode.ConcurrentModification, message);

/** A version create request resolved against its dataset. */
export interface PlannedVersion {
  entry: BatchEntry;
  versions: TableVersions;
  /** The staged bytes as validated (a Lance manifest of entry.version); null when the staged file is gone. */
  staged?: Buffer | null;
}

/**
 * Resolves a version request against the dataset of table `id`. Without a naming scheme in the
 * request, the scheme of the latest version is used: `latest` when the caller knows it (null: no
 * version yet), else one lookup here.
 */
export async function planVersion(
  id: string[],
  versions: TableVersions,
  request: Omit<CreateTableVersionEntry, 'id'>,
  latest?: CommittedVersion | null,
): Promise<PlannedVersion> {
  requireMainBranch(request.branch);
  const stagedKey = versions.stagedKey(request.manifest_path);
  const current = request.naming_scheme === undefined || request.naming_scheme === null || request.naming_scheme === 'V1' ? (latest === undefined ? await versions.latest() : latest) : null;
  // Names only ever move from V1 to V2 (Lance's migration), never back: that is what lets the
  // latest version of a V2 table be read off one LIST (TableVersions.latest).
  if (request.naming_scheme === 'V1' && current?.scheme === 'V2') {
    throw invalidInput(`naming_scheme: table ${displayId(id)} names its versions V2 (the latest is ${current.version}); a V1 name would hide behind them`);
  }
  const scheme: ManifestNamingScheme = request.naming_scheme ?? current?.scheme ?? 'V2';
  return {
    versions,
    entry: {
      table_id: id,
      location: versions.store.location(versions.dir.key),
      version: request.version,
      staged_key: stagedKey,
      final_key: versions.finalKey(request.version, scheme),
      naming_scheme: scheme,
      ...(request.manifest_size !== undefined && request.manifest_size !== null ? { manifest_size: request.manifest_size } : {}),
      ...(request.e_tag ? { e_tag: request.e_tag } : {}),
      ...(request.metadata ? { metadata: request.metadata } : {}),
    },
  };
}

export function stagedMissing(p: PlannedVersion): NamespaceError {
  return invalidInput(`staged manifest ${JSON.stringify(p.versions.manifestPath(p.entry.staged_key))} does not exist`);
}

/**
 * Copies the staged manifest to its final name with create-if-absent. Finding the final name
 * already holding the same bytes is success (a retry, or a roll-forward after a crash).
 * Store calls: the create-if-absent, the sidecar, and on a local disk Lance's hint (not fsynced).
 *
 * The sidecar is written while the manifest is, but placed only once the manifest's
 * create-if-absent has succeeded and is durable (PutOptions.placeAfter): so a sidecar is only
 * ever found beside the manifest its writer committed, never describes a manifest another writer
 * put there first, and a crash between the two leaves a version without a sidecar (its facts are
 * then the manifest's), never a sidecar without its version. On a local disk the two files'
 * fsyncs overlap: three rounds of fsync instead of four.
 */
export async function writeManifest(p: PlannedVersion, transactionId?: string): Promise<CommittedVersion> {
  const { entry, versions } = p;
  const staged = p.staged !== undefined ? p.staged : ((await versions.store.get(entry.staged_key))?.body ?? null);
  // The commit time is the sidecar's, so that every answer about this version agrees on it
  // (object stores report modification times in whole seconds). The sidecar also holds what the
  // client said about the version (e_tag, metadata), so it is as durable as the manifest.
  const committedAt = new Date();
  const sidecar: VersionSidecar = {
    version: entry.version,
    ...(entry.manifest_size !== undefined ? { manifest_size: entry.manifest_size } : {}),
    ...(entry.e_tag !== undefined ? { e_tag: entry.e_tag } : {}),
    ...(entry.metadata !== undefined ? { metadata: entry.metadata } : {}),
    naming_scheme: entry.naming_scheme,
    committed_at: committedAt.toISOString(),
    ...(transactionId ? { transaction_id: transactionId } : {}),
  };
  let committed: CommittedVersion | null = null;
  let sidecarWritten = false;
  if (staged) {
    const created = versions.store.put(entry.final_key, staged, { ifNoneMatch: '*' });
    const sidecarPlaced = versions.writeSidecar(sidecar, created);
    // Awaited below only once the manifest's outcome is known: its failure must not go unhandled meanwhile.
    sidecarPlaced.catch(() => undefined);
    try {
      const info = await created;
      committed = { version: entry.version, scheme: entry.naming_scheme, key: info.key, size: info.size, etag: info.etag, lastModified: info.lastModified };
      await sidecarPlaced;
      sidecarWritten = true;
    } catch (e) {
      if (committed) throw e; // the sidecar's own failure
      // The manifest was not created, so neither is the sidecar (its put rejects with the same error).
      await sidecarPlaced.catch(() => undefined);
      if (!(e instanceof PreconditionFailedError)) throw e;
      const existing = await versions.store.get(entry.final_key);
      if (!existing || !existing.body.equals(staged)) {
        throw conflict(`table ${displayId(entry.table_id)}: version ${entry.version} was already committed with another manifest`);
      }
    }
  }
  committed ??= await versions.get(entry.version, entry.naming_scheme);
  if (!committed) throw stagedMissing(p);
  // Found committed already (a retry, a roll-forward): its sidecar follows the manifest that is there.
  if (!sidecarWritten) await versions.writeSidecar(sidecar);
  committed = { ...committed, lastModified: committedAt };
  // Lance's hint serves readers that cannot list cheaply: V1 tables, and local disks.
  if (entry.naming_scheme === 'V1' || versions.store.listsWholeDirectory) await versions.writeHint(entry.version);
  return committed;
}

/** Committed versions as the API reports them: the sidecar's facts where there is one. */
export async function versionsOnWire(versions: TableVersions, committed: CommittedVersion[]): Promise<TableVersion[]> {
  const sidecars = await versions.readSidecars(committed.map((c) => c.version));
  return committed.map((c) => {
    const sidecar = sidecars.get(c.version);
    return {
      version: c.version,
      manifest_path: versions.manifestPath(c.key),
      manifest_size: sidecar?.manifest_size ?? c.size,
      e_tag: sidecar?.e_tag ?? c.etag,
      timestamp_millis: sidecar ? Date.parse(sidecar.committed_at) : c.lastModified.getTime(),
      metadata: sidecar?.metadata ?? {},
    };
  });
}

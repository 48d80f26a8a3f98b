import { ErrorCode, NamespaceError } from '../../model/errors.js';
import { type BranchName, type BranchRef, branchNotFound, branchTreeDir, encodeBranchSegment, findBranchRef } from '../branches/branch-refs.js';
import { displayId } from '../catalog/catalog.js';
import { branchReservationsDirKey } from '../catalog/layout.js';
import type { StoreDir } from '../catalog/locations.js';
import type { BatchEntry } from '../transactions/transaction-log.js';
import { type CommittedVersion, TableVersions } from './dataset-versions.js';

// A table's lines of history, as the version API addresses them (`branch`): main, the dataset's
// own `_versions/`, and each branch, `tree/<name>/_versions/` (Lance's layout, branch-refs.ts).
// Every line is committed by the same protocol and keeps the same invariants (commit-steps.ts)
// over its own TableVersions: the branch's manifests, Lance's hint and the service's sidecars in
// its tree (Lance deletes the tree with the branch, so nothing of a deleted branch describes a
// later one of the same name), its version slots in the dataset's own `_catalog/reservations/`
// (branches/<name>/), where a drop of the table looks for the commits it waits for.
//
// A branch's history starts at the version it was forked at (its first manifest is a clone of
// that version of its parent) and has no gaps from there. Lance's create_branch on a table with
// managed versioning commits that first manifest through the service before it writes the ref
// (pylance 14: list versions of the branch, describe the source version, create_table_version
// on the branch, then the ref), so on such a table a commit on a branch without a ref is that
// first commit, at whatever version it names, while the branch has no version; on any other
// table it is 404 code 22 (requireRefOrManaged). A branch with versions and no ref is none (404
// code 22), as is, to a read, a branch with neither.

/** The versions of one line of history of the dataset at `dataDir`: main (null) or a branch. */
export function versionsOn(dataDir: StoreDir, branch: BranchName): TableVersions {
  if (branch === null) return new TableVersions(dataDir);
  return new TableVersions(branchTreeDir(dataDir, branch), branchReservationsDirKey(dataDir.key, encodeBranchSegment(branch)));
}

/** A line of history of a table's dataset as a request resolved it. */
export interface VersionLine {
  /** The table's dataset (main's directory, whatever the branch). */
  dataDir: StoreDir;
  branch: BranchName;
  versions: TableVersions;
}

export const versionLine = (dataDir: StoreDir, branch: BranchName): VersionLine => ({ dataDir, branch, versions: versionsOn(dataDir, branch) });

/** The line of history a batch's entry commits on (its location is the table's dataset). */
export const branchOfEntry = (entry: Pick<BatchEntry, 'branch'>): BranchName => entry.branch ?? null;

/** One line of history of one dataset (its location and branch), as a key of maps and sets. */
export const lineId = (entry: Pick<BatchEntry, 'location' | 'branch'>): string => `${entry.location}#${entry.branch ?? ''}`;

/** One version slot of one line of one dataset, as a key of maps and sets. */
export const slotId = (entry: Pick<BatchEntry, 'location' | 'branch' | 'version'>): string => `${lineId(entry)}#${entry.version}`;

/**
 * The ref of the branch of `line` (null for main, or a branch without one): one GET, made at the
 * same time as the line's other reads.
 */
export const refOf = (line: VersionLine): Promise<BranchRef | null> =>
  line.branch === null ? Promise.resolve(null) : findBranchRef(line.dataDir, line.branch);

/**
 * The version a commit on `line` may create next, from what it read holding the slot: the line's
 * latest version and the branch's ref. latest + 1; on a line without a version, 1 on main, on a
 * registered branch the version it was forked at, on a branch without a ref the version asked for
 * (its first commit, see above). A branch with versions but no ref is 404 code 22, but for a
 * version it holds (a retry, answered as one).
 */
export function nextVersionOn(id: string[], line: VersionLine, ref: BranchRef | null, latest: CommittedVersion | null, requested: number): number {
  if (latest) {
    if (line.branch !== null && ref === null && requested > latest.version) throw branchNotFound(displayId(id), line.branch);
    return latest.version + 1;
  }
  if (line.branch === null) return 1;
  return ref ? ref.contents.parentVersion : requested;
}

/**
 * A commit on a branch without a ref (`ref` null: none when the request resolved it) is taken only
 * where the service is the table's commit path, managed versioning: that is where Lance's
 * create_branch commits the branch's first manifest before it writes the ref (see above). On
 * any other table a branch exists only by its ref (Lance forks it directly, the service's own
 * fork too), so such a commit is 404 code 22 and writes nothing: a history left without a ref
 * would make its name unforkable. Reads the table's flag only then (off the path of a commit on
 * main or on a branch with a ref).
 */
export async function requireRefOrManaged(
  table: { id: string[]; managedVersioning(): Promise<boolean> },
  line: VersionLine,
  ref: BranchRef | null,
): Promise<void> {
  if (line.branch === null || ref !== null) return;
  if (!(await table.managedVersioning())) throw branchNotFound(displayId(table.id), line.branch);
}

/**
 * A commit on a branch that resolved its ref (`resolved`) before it held its slot reads the ref
 * again holding it (`now`): a ref gone or replaced meanwhile is a delete of the branch (perhaps
 * a fork of its name anew) that did not see this commit, so it must not write (404 code 22: the
 * branch it addressed is gone; see the branch delete's protocol in table-fences.ts). A commit that
 * found no ref is a branch's first commit (see above) and has nothing to compare.
 */
export function requireSameRef(id: string[], line: VersionLine, resolved: BranchRef | null, now: BranchRef | null): void {
  if (line.branch === null || resolved === null || now?.etag === resolved.etag) return;
  throw new NamespaceError(
    ErrorCode.TableBranchNotFound,
    `branch ${JSON.stringify(line.branch)} of table ${displayId(id)} was deleted while this commit ran; nothing was committed`,
  );
}

/** A read of a branch that has neither a ref nor a version (`found` false): 404 code 22. */
export function requireBranchFound(id: string[], line: VersionLine, ref: BranchRef | null, found: boolean): void {
  if (line.branch !== null && ref === null && !found) throw branchNotFound(displayId(id), line.branch);
}

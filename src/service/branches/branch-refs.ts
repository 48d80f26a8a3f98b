import { z } from 'zod';
import { ErrorCode, invalidInput, NamespaceError } from '../../model/errors.js';
import { type ListPage, listAll } from '../../store/object-store.js';
import type { StoreDir } from '../catalog/locations.js';

// Lance's branches as they lie in a dataset's directory (pylance 14 and @lancedb/lancedb 0.39
// write and read exactly this): the branch `<name>` is the ref `_refs/branches/<encoded>.json`
// (camelCase JSON: parentBranch, identifier, parentVersion, createAt, manifestSize, metadata;
// the spec's BranchContents names the same fields) and its own line of history under
// `tree/<name>/` (`_versions/`, `_transactions/`, and what its writes add; its first manifest
// reuses the parent's data files). `<encoded>` is the name with every byte but an ASCII letter,
// digit, '.', '-' or '_' percent-encoded (object_store's path segment: '/' becomes %2F), while
// `tree/<name>/` keeps the name as it is, so `a/b` lives in `tree/a/b/`.
//
// A branch exists exactly when its ref does: every lookup of a branch reads that one object (one
// GET), once per request, and the request hands the BranchRef down with its table.

/** The branch a request addresses: null is main (the dataset's own history), else a named branch. */
export type BranchName = string | null;

const MAIN = 'main';

/**
 * Lance's rule for a branch name (lance-table `check_valid_branch`, as pylance 14 applies it):
 * '/'-separated segments, none empty, each of Unicode letters and digits, '.', '-', '_' only;
 * no '..', no leading or trailing '/', not ending in '.lock', and not 'main' (the default
 * branch); and, since Lance then fails on its tree's path, no segment '.'. Returns what is wrong, or null for a good name.
 */
export function branchNameProblem(name: string): string | null {
  if (name === '') return 'a branch name must not be empty';
  if (name === MAIN) return '"main" is the default branch';
  if (name.startsWith('/') || name.endsWith('/')) return 'a branch name must not start or end with "/"';
  if (name.includes('..')) return 'a branch name must not contain ".."';
  for (const segment of name.split('/')) {
    if (segment === '') return 'a branch name must not have an empty segment between "/"';
    // Lance accepts it, then fails on the path tree/<name>/ (object_store: illegal character sequence ".").
    if (segment === '.') return 'a branch name must not have a segment "."';
    if (!SEGMENT.test(segment)) return `its segment ${JSON.stringify(segment)} has a character other than a letter, a digit, ".", "-" or "_"`;
  }
  if (name.endsWith('.lock')) return 'a branch name must not end with ".lock"';
  if (encodeBranchSegment(name).length > MAX_ENCODED_NAME_BYTES)
    return `its ref's file name would be longer than every store takes (at most ${MAX_ENCODED_NAME_BYTES} bytes with each byte but a letter, a digit, ".", "-" and "_" as three)`;
  return null;
}

/**
 * The ref `_refs/branches/<encoded>.json` is one file name on a local disk (255 bytes at most):
 * the same bound on every store, so that a name the service accepts on S3 works on a disk too.
 */
const MAX_ENCODED_NAME_BYTES = 200;

// Rust's char::is_alphanumeric is Unicode's Alphabetic or Numeric.
const SEGMENT = /^[\p{Alphabetic}\p{N}._-]+$/u;

/**
 * Branch `a/<seg>` keeps its history in `tree/a/<seg>/`, inside branch `a`'s own tree; Lance accepts
 * a segment that names one of `a`'s directories (`data`, `_versions`...), and deleting such a
 * branch removes that directory of `a` with it. So no segment after the first may name a directory
 * a dataset's tree holds or may hold: `data`, `tree`, or any name starting with "_" (Lance's
 * `_versions`, `_transactions`, `_indices`, `_deletions`, `_refs`, the service's `_catalog`...).
 * Returns what is wrong, or null.
 */
export function treeClashProblem(name: string): string | null {
  const segments = name.split('/');
  const at = segments.findIndex((segment, i) => i > 0 && (segment.startsWith('_') || segment === 'data' || segment === 'tree'));
  if (at === -1) return null;
  return `its segment ${JSON.stringify(segments[at])} would put its tree inside a directory of the tree of branch ${JSON.stringify(segments.slice(0, at).join('/'))} (no segment after the first may be "data", "tree" or start with "_")`;
}

/**
 * A 400 code 13 unless `name` is a name for a new branch: one Lance accepts whose tree does not
 * lie inside another branch's directories.
 */
export function requireBranchName(name: string, field = 'name'): void {
  refuseBadName(name, field, branchNameProblem(name) ?? treeClashProblem(name));
}

function refuseBadName(name: string, field: string, problem: string | null): void {
  if (problem !== null) throw invalidInput(`${field} ${JSON.stringify(name)} is not a valid branch name: ${problem}`);
}

/**
 * A 400 code 13 unless `name` is a name Lance accepts; a 409 code 19 when it is one whose tree lies
 * inside another branch's directories (treeClashProblem; only pylance makes those): Lance would
 * delete that directory of the other branch with it, so the service never hands such a delete to Lance.
 */
export function requireDeletableBranchName(name: string): void {
  refuseBadName(name, 'name', branchNameProblem(name));
  const clash = treeClashProblem(name);
  if (clash !== null) throw new NamespaceError(ErrorCode.InvalidTableState, `branch ${JSON.stringify(name)} cannot be deleted: ${clash}`);
}

/**
 * The branch a request's `branch` field names: absent, null, "" and "main" are main (as Lance's
 * reference server reads them); any other name must be one Lance accepts (400 code 13 otherwise).
 */
export function normalizeBranch(branch: string | null | undefined, field = 'branch'): BranchName {
  if (branch === undefined || branch === null || branch === '' || branch === MAIN) return null;
  // A name whose tree clashes with another branch's (treeClashProblem) may exist, made by pylance: it can be read.
  refuseBadName(branch, field, branchNameProblem(branch));
  return branch;
}

/** The stored ref of a branch (lance-table's BranchContents, serialized by serde in camelCase). */
const StoredBranchContents = z.object({
  parentBranch: z.string().nullish(),
  parentVersion: z.number().int().nonnegative(),
  createAt: z.number().int().nonnegative(),
  manifestSize: z.number().int().nonnegative(),
  metadata: z.record(z.string(), z.string()).nullish(),
});

/** What a branch's ref says (the spec's BranchContents: parentBranch absent when forked from main). */
export interface BranchContents {
  parentBranch?: string;
  parentVersion: number;
  createAt: number;
  manifestSize: number;
  metadata: Record<string, string>;
}

/** A branch as one request read it: its name, what its ref says, and that ref's etag. */
export interface BranchRef {
  name: string;
  contents: BranchContents;
  etag: string;
}

const REFS = '_refs/branches/';
const TREE = 'tree/';

/** The name as one segment of an object_store path (see above). */
export function encodeBranchSegment(name: string): string {
  // encodeURIComponent leaves exactly the ASCII letters, digits and "-_.!~*'()" alone; a branch
  // name holds none of the last five, so for a branch name this is object_store's encoding.
  return encodeURIComponent(name);
}

/** The key of the ref of branch `name` in the dataset at `dataDir`. */
export function branchRefKey(dataDir: StoreDir, name: string): string {
  return `${dataDir.key}${REFS}${encodeBranchSegment(name)}.json`;
}

/** The directory of the refs of every branch of the dataset at `dataDir`. */
export function branchRefsPrefix(dataDir: StoreDir): string {
  return `${dataDir.key}${REFS}`;
}

/** Where branch `name` of the dataset at `dataDir` keeps its own history (its `_versions/` and `_transactions/` are below). */
export function branchTreeDir(dataDir: StoreDir, name: string): StoreDir {
  return { ...dataDir, key: `${dataDir.key}${TREE}${name}/` };
}

/** The directory a request on `branch` reads and writes versions in: the dataset's own for main. */
export function branchDir(dataDir: StoreDir, branch: BranchRef | null): StoreDir {
  return branch === null ? dataDir : branchTreeDir(dataDir, branch.name);
}

/**
 * The name of the ref at `key` in the refs' directory `prefix` (Lance's `<encoded name>.json`),
 * or null: not a ref Lance would have written (or, with `problem`, of a name it refuses).
 */
function nameOfRefKey(prefix: string, key: string, problem: (name: string) => string | null = branchNameProblem): string | null {
  if (!key.startsWith(prefix) || !key.endsWith('.json')) return null;
  const segment = key.slice(prefix.length, -'.json'.length);
  if (segment.includes('/')) return null;
  let name: string;
  try {
    name = decodeURIComponent(segment);
  } catch {
    return null;
  }
  return name !== '' && problem(name) === null && encodeBranchSegment(name) === segment ? name : null;
}

function parseBranchRef(name: string, key: string, body: Buffer, etag: string): BranchRef {
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch (cause) {
    throw new NamespaceError(ErrorCode.Internal, `the ref of branch ${JSON.stringify(name)} (${key}) is not JSON`, { cause });
  }
  const parsed = StoredBranchContents.safeParse(json);
  if (!parsed.success) throw new NamespaceError(ErrorCode.Internal, `the ref of branch ${JSON.stringify(name)} (${key}) is not a Lance branch ref`);
  const { parentBranch, parentVersion, createAt, manifestSize, metadata } = parsed.data;
  const contents: BranchContents = { parentVersion, createAt, manifestSize, metadata: metadata ?? {} };
  if (parentBranch !== null && parentBranch !== undefined && parentBranch !== MAIN) contents.parentBranch = parentBranch;
  return { name, contents, etag };
}

/** The words that name a line of history in a message: none for main. */
export const onBranch = (branch: BranchName): string => (branch === null ? '' : ` on branch ${JSON.stringify(branch)}`);

/** The 404 code 22 of a branch that does not exist. */
export function branchNotFound(tableName: string, name: string): NamespaceError {
  return new NamespaceError(ErrorCode.TableBranchNotFound, `table ${tableName} has no branch ${JSON.stringify(name)}`);
}

/** Branch `name`'s ref, or null when the dataset at `dataDir` has no such branch (one GET). */
export async function findBranchRef(dataDir: StoreDir, name: string): Promise<BranchRef | null> {
  const key = branchRefKey(dataDir, name);
  const object = await dataDir.store.get(key);
  return object && parseBranchRef(name, key, object.body, object.etag);
}

/** Branch `name`'s ref (one GET); 404 code 22 when the table `tableName` has no such branch. */
export async function requireBranchRef(dataDir: StoreDir, name: string, tableName: string): Promise<BranchRef> {
  const ref = await findBranchRef(dataDir, name);
  if (!ref) throw branchNotFound(tableName, name);
  return ref;
}

/**
 * The branch a request names, resolved once: null for main (no store call), else its ref (one
 * GET); 404 code 22 when the table `tableName` has no such branch.
 */
export async function resolveBranch(dataDir: StoreDir, branch: BranchName, tableName: string): Promise<BranchRef | null> {
  return branch === null ? null : requireBranchRef(dataDir, branch, tableName);
}

/** One page of a dataset's branches, in the byte order of their refs' keys. */
export interface BranchRefPage {
  branches: BranchRef[];
  /** The name of the last branch of this page when more may follow; null at the end. */
  lastName: string | null;
}

/**
 * Up to `limit` names of the refs in the directory `prefix`, after the ref at `startAfter` (from
 * the first when undefined), in the byte order of their keys: one LIST of the directory sized to
 * the page; entries that are not refs (another tool's files) are skipped, so a page may take
 * more than one. `lastName`: the page's last name when more may follow, else null.
 */
async function listRefNames(
  dataDir: StoreDir,
  prefix: string,
  nameOf: (key: string) => string | null,
  options: { startAfter: string | undefined; limit: number },
): Promise<{ names: string[]; lastName: string | null }> {
  const names: string[] = [];
  let { startAfter } = options;
  let more = true;
  while (more && names.length < options.limit) {
    const page = await dataDir.store.list(prefix, { delimiter: '/', startAfter, maxKeys: options.limit - names.length });
    for (const { key } of page.objects) {
      const name = nameOf(key);
      if (name !== null) names.push(name);
    }
    more = page.nextStartAfter !== undefined;
    startAfter = page.nextStartAfter;
  }
  return { names, lastName: more ? (names.at(-1) ?? null) : null };
}

/**
 * Up to `limit` branches after the branch `afterName` (from the first when undefined): one LIST of
 * the refs' directory (a page of it) and one GET per branch listed, at the same time. A ref deleted
 * between the two is left out.
 */
export async function listBranchRefs(dataDir: StoreDir, options: { afterName?: string; limit: number }): Promise<BranchRefPage> {
  const prefix = branchRefsPrefix(dataDir);
  const startAfter = options.afterName === undefined ? undefined : branchRefKey(dataDir, options.afterName);
  const { names, lastName } = await listRefNames(dataDir, prefix, (key) => nameOfRefKey(prefix, key), { startAfter, limit: options.limit });
  const refs = await Promise.all(names.map((name) => findBranchRef(dataDir, name)));
  return { branches: refs.filter((ref): ref is BranchRef => ref !== null), lastName };
}

/**
 * The branches whose history goes back to branch `name` (forked from it, or from one forked from
 * it, ...), by their refs: Lance keeps a branch while they refer to its versions (its
 * delete_branch answers "Ref conflict: Branch p is referenced by [(c, 1), (g, 1)]" for g forked
 * from c forked from p; probed with @lancedb/lancedb 0.39). One LIST of the refs and a GET each.
 */
export async function branchesForkedFrom(dataDir: StoreDir, name: string): Promise<string[]> {
  const refs = (await Promise.all((await allBranchNames(dataDir)).map((n) => findBranchRef(dataDir, n)))).filter((r): r is BranchRef => r !== null);
  const parentOf = new Map(refs.map((r) => [r.name, r.contents.parentBranch]));
  const goesBackTo = (start: string): boolean => {
    const seen = new Set<string>();
    for (let at = parentOf.get(start); at !== undefined && !seen.has(at); at = parentOf.get(at)) {
      if (at === name) return true;
      seen.add(at);
    }
    return false;
  };
  return refs.map((r) => r.name).filter((n) => n !== name && goesBackTo(n));
}

/** Where Lance keeps a dataset's tags: `_refs/tags/<encoded name>.json` (the name percent-encoded as a URI component). */
export const tagRefsPrefix = (dataDir: StoreDir): string => `${dataDir.key}_refs/tags/`;
export const tagRefKey = (dataDir: StoreDir, name: string): string => `${tagRefsPrefix(dataDir)}${encodeURIComponent(name)}.json`;

/** A tag's ref as Lance writes it (camelCase: branch, version, manifestSize, createdAt, updatedAt, metadata). */
const StoredTagContents = z.object({
  branch: z.string().nullish(),
  version: z.number().int().nonnegative(),
  manifestSize: z.number().int().nonnegative(),
});

/** A tag as its ref says: the version it points to, that version's manifest size, and the branch it points into (absent: main). */
export interface TagRef {
  name: string;
  version: number;
  manifestSize: number;
  branch?: string;
}

/** What the tag ref `body` says, or null when it is not one Lance would have written. */
function tagOfRef(name: string, body: Buffer): TagRef | null {
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    return null;
  }
  const parsed = StoredTagContents.safeParse(json);
  if (!parsed.success) return null;
  const { branch, version, manifestSize } = parsed.data;
  const named = typeof branch === 'string' && branch !== '' && branch !== MAIN ? branch : undefined;
  return { name, version, manifestSize, ...(named === undefined ? {} : { branch: named }) };
}

/** Tag `name` as its ref says (one GET), or null when there is none; a 500 for a ref Lance would not have written. */
export async function findTagRef(dataDir: StoreDir, name: string): Promise<TagRef | null> {
  const key = tagRefKey(dataDir, name);
  const object = await dataDir.store.get(key);
  if (!object) return null;
  const tag = tagOfRef(name, object.body);
  if (!tag) throw new NamespaceError(ErrorCode.Internal, `the ref of tag ${JSON.stringify(name)} (${key}) is not a Lance tag ref`);
  return tag;
}

/**
 * Up to `limit` tags after the tag `afterName` (from the first when undefined), in the byte order of
 * their refs' keys, as their refs say: one LIST of `_refs/tags/` sized to the page and one GET per
 * tag listed, all at once (the engine's listing would read every tag of the table, and not say
 * which branch each points into). A tag deleted between the two is left out.
 */
export async function listTagRefs(dataDir: StoreDir, options: { afterName?: string; limit: number }): Promise<{ tags: TagRef[]; lastName: string | null }> {
  const prefix = tagRefsPrefix(dataDir);
  const startAfter = options.afterName === undefined ? undefined : tagRefKey(dataDir, options.afterName);
  const { names, lastName } = await listRefNames(dataDir, prefix, (key) => nameOfRefKey(prefix, key, () => null), { startAfter, limit: options.limit });
  const tags = await Promise.all(names.map((name) => findTagRef(dataDir, name)));
  return { tags: tags.filter((tag): tag is TagRef => tag !== null), lastName };
}

/** The tags that point into branch `name`, which Lance keeps while they do: one LIST of the tags and a GET each, for a delete only. */
export async function tagsPointingInto(dataDir: StoreDir, name: string): Promise<string[]> {
  const prefix = tagRefsPrefix(dataDir);
  const { objects } = await listAll(dataDir.store, prefix, { delimiter: '/' });
  const tags = await Promise.all(
    objects.map(async ({ key }) => {
      const tag = nameOfRefKey(prefix, key, () => null);
      const object = tag === null ? null : await dataDir.store.get(key);
      return tag !== null && object && tagOfRef(tag, object.body)?.branch === name ? tag : null;
    }),
  );
  return tags.filter((tag): tag is string => tag !== null);
}

/** Every branch's name, in the order of their refs' keys: for the few callers that must see them all (a delete looks for branches below the one it deletes). */
export async function allBranchNames(dataDir: StoreDir): Promise<string[]> {
  const prefix = branchRefsPrefix(dataDir);
  const { objects } = await listAll(dataDir.store, prefix, { delimiter: '/' });
  return objects.map(({ key }) => nameOfRefKey(prefix, key)).filter((name): name is string => name !== null);
}

/**
 * The directories of a dataset's own files, Lance's and the service's (`_catalog/`: its version
 * sidecars): a branch's tree holds its files in these, and the trees of branches nested in it beside them.
 */
const DATASET_DIRS = new Set(['_versions', '_transactions', 'data', '_indices', '_deletions', '_catalog']);

/** Every key in branch `name`'s tree (its own files and the trees of branches nested in it): one LIST, a page for a fresh name. */
export function listBranchTree(dataDir: StoreDir, name: string): Promise<ListPage> {
  return listAll(dataDir.store, branchTreeDir(dataDir, name).key);
}

/** The branches nested in branch `name` (`<name>/<more>`): one LIST of the refs that start with its encoded name and "%2F". */
async function branchesNestedIn(dataDir: StoreDir, name: string): Promise<string[]> {
  const prefix = branchRefsPrefix(dataDir);
  const { objects } = await listAll(dataDir.store, `${prefix}${encodeBranchSegment(`${name}/`)}`, { delimiter: '/' });
  return objects.map(({ key }) => nameOfRefKey(prefix, key)).filter((n): n is string => n?.startsWith(`${name}/`) === true);
}

/**
 * Removes what is left of branch `name`'s own files in its tree (`tree/<name>/` and Lance's
 * directories in it), but the trees of the branches nested under it (`<name>/<more>`, which Lance
 * keeps there) and anything else (a branch `p` that `name` is nested in may keep its own files
 * beside: `p/data`'s tree is `p`'s data directory): what a write that outlived the branch's
 * delete placed, or what Lance's own delete leaves of a branch with nested ones (its whole tree).
 * Called by the branch's delete once its writes ended, and by a fork of the name before the
 * engine forks it, so that a branch never takes an old one's files as its history. `listed` is
 * the tree's listing (listBranchTree) when the caller read it already. Cost: one LIST of the tree
 * (a fork's, of a name never used, finds nothing and stops there); when it holds something, one
 * LIST of the refs of the branches nested in it, and a second one of the tree to delete.
 */
export async function removeBranchLeftovers(dataDir: StoreDir, name: string, listed?: ListPage): Promise<void> {
  const tree = branchTreeDir(dataDir, name);
  const { objects } = listed ?? (await listBranchTree(dataDir, name));
  const maybeOwn = (key: string) => DATASET_DIRS.has(key.slice(tree.key.length).split('/')[0] ?? '');
  if (!objects.some(({ key }) => maybeOwn(key))) return;
  const nested = (await branchesNestedIn(dataDir, name)).map((n) => branchTreeDir(dataDir, n).key);
  const own = (key: string) => maybeOwn(key) && !nested.some((prefix) => key.startsWith(prefix));
  if (!objects.some(({ key }) => own(key))) return;
  await dataDir.store.deletePrefix(tree.key, { keep: objects.filter(({ key }) => !own(key)).map(({ key }) => key) });
}

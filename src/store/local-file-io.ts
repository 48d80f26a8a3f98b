import fsSync from 'node:fs';

// Small synchronous file steps the local store and its spare files share (and the catalog's
// allowed locations, see service/catalog/locations.ts).

/** In the name of every file the local store keeps out of sight (never listed; a drop removes them). */
export const TEMP_MARK = '.~tmp~';

/** The real path of `p` (symbolic links resolved), or null when it does not exist. */
export function existingRealPath(p: string): string | null {
  try {
    return fsSync.realpathSync.native(p);
  } catch (e) {
    if (errCode(e) === 'ENOENT' || errCode(e) === 'ENOTDIR') return null;
    throw e;
  }
}

/** The `code` of a file-system error (ENOENT, EEXIST, ...), if it has one. */
export function errCode(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null && 'code' in e ? String((e as { code: unknown }).code) : undefined;
}

/** Writes all of `body` at the file's position (a short write is continued). */
export function writeWhole(fd: number, body: Buffer): void {
  for (let off = 0; off < body.length; ) off += fsSync.writeSync(fd, body, off, body.length - off);
}

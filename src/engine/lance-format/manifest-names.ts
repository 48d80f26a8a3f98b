// Lance manifest file names under `_versions/`. V1: `{version}.manifest`; V2: the 20-digit
// zero-padded `u64::MAX - version`, so that names sort newest first. Staged manifests
// (`<name>-<uuid>`) and detached ones (`d...`) are not versions of the main history.

const U64_MAX = 18446744073709551615n;
const V2_NAME = /^(\d{20})\.manifest$/;
const V1_NAME = /^(\d{1,19})\.manifest$/;

export type ManifestNamingScheme = 'V1' | 'V2';

export function manifestFileName(version: number | bigint, scheme: ManifestNamingScheme): string {
  const v = BigInt(version);
  return scheme === 'V2' ? `${(U64_MAX - v).toString().padStart(20, '0')}.manifest` : `${v}.manifest`;
}

/** Version and scheme of a manifest file name, or null for anything that is not a committed manifest. */
export function parseManifestFileName(name: string): { version: number; scheme: ManifestNamingScheme } | null {
  const v2 = V2_NAME.exec(name);
  if (v2) {
    const version = U64_MAX - BigInt(v2[1] ?? '0');
    return version <= BigInt(Number.MAX_SAFE_INTEGER) ? { version: Number(version), scheme: 'V2' } : null;
  }
  const v1 = V1_NAME.exec(name);
  if (v1) {
    const version = Number(v1[1]);
    return Number.isSafeInteger(version) ? { version, scheme: 'V1' } : null;
  }
  return null;
}

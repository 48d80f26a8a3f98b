// Reads a ListObjectsV2 answer (`ListBucketResult`). The document is flat and every value is
// entity-escaped text, so a few patterns read it exactly; no XML library is needed on this path.

export interface ListedObject {
  key: string;
  size: number;
  etag: string;
  lastModified: Date;
}

export interface ListObjectsResult {
  objects: ListedObject[];
  commonPrefixes: string[];
  isTruncated: boolean;
  nextContinuationToken?: string;
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

export function decodeXmlText(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-z]+);/g, (whole, entity: string) => {
    if (entity.startsWith('#x')) return String.fromCodePoint(Number.parseInt(entity.slice(2), 16));
    if (entity.startsWith('#')) return String.fromCodePoint(Number.parseInt(entity.slice(1), 10));
    return ENTITIES[entity] ?? whole;
  });
}

/** The text of the first `<name>` element in `xml`, decoded; undefined when absent. */
function element(xml: string, name: string): string | undefined {
  const open = xml.indexOf(`<${name}>`);
  if (open < 0) return undefined;
  const start = open + name.length + 2;
  const end = xml.indexOf(`</${name}>`, start);
  return end < 0 ? undefined : decodeXmlText(xml.slice(start, end));
}

/** The raw contents of every `<name>…</name>` block. */
function blocks(xml: string, name: string): string[] {
  const out: string[] = [];
  const open = `<${name}>`;
  const close = `</${name}>`;
  for (let at = xml.indexOf(open); at >= 0; at = xml.indexOf(open, at)) {
    const end = xml.indexOf(close, at + open.length);
    if (end < 0) break;
    out.push(xml.slice(at + open.length, end));
    at = end + close.length;
  }
  return out;
}

export function parseListObjectsResult(xml: string): ListObjectsResult {
  if (!xml.includes('<ListBucketResult')) throw new Error(`not a ListObjectsV2 answer: ${xml.slice(0, 200)}`);
  const objects = blocks(xml, 'Contents').map((entry) => {
    const key = element(entry, 'Key');
    if (key === undefined) throw new Error(`a listed object without a key: ${entry.slice(0, 200)}`);
    const modified = element(entry, 'LastModified');
    return { key, size: Number(element(entry, 'Size') ?? 0), etag: element(entry, 'ETag') ?? '', lastModified: modified ? new Date(modified) : new Date(0) };
  });
  const commonPrefixes = blocks(xml, 'CommonPrefixes').flatMap((entry) => {
    const prefix = element(entry, 'Prefix');
    return prefix === undefined ? [] : [prefix];
  });
  // Neither element occurs inside Contents or CommonPrefixes, so the first one is the result's own.
  const token = element(xml, 'NextContinuationToken');
  return { objects, commonPrefixes, isTruncated: element(xml, 'IsTruncated') === 'true', ...(token ? { nextContinuationToken: token } : {}) };
}

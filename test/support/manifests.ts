import { randomUUID } from 'node:crypto';
import { nextManifestWithSchemaMetadata } from '../../src/engine/lance-format/manifest.js';

// Lance manifest files for catalog tests that never open the dataset: the service checks that a
// staged manifest parses and names the version it is committed as, nothing more.

/** The smallest Lance manifest file: an empty protobuf and the footer (offset 0, format 0.1, "LANC"). */
function emptyManifest(): Buffer {
  const file = Buffer.alloc(4 + 16);
  file.writeBigUInt64LE(0n, 4);
  file.writeUInt16LE(0, 12);
  file.writeUInt16LE(1, 14);
  file.write('LANC', 16, 'latin1');
  return file;
}

/** A Lance manifest of `version` whose bytes are unique (a random tag in its schema metadata). */
export function manifestBytes(version: number, tag: string = randomUUID()): Buffer {
  return nextManifestWithSchemaMetadata(emptyManifest(), { version, schemaMetadata: { tag }, timestampMillis: Date.now() });
}

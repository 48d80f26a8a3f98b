// The adapter reads ListObjectsV2 answers itself: entity-escaped keys, common prefixes, and the
// truncation fields must come out exactly, and elements inside entries must not be taken for the result's own.

import { describe, expect, it } from 'vitest';
import { decodeXmlText, parseListObjectsResult } from '../../src/store/s3/list-objects-result.js';

const answer = (body: string): string =>
  `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>r/</Prefix><MaxKeys>2</MaxKeys>${body}</ListBucketResult>`;

describe('parseListObjectsResult', () => {
  it('reads objects, common prefixes and the continuation of a truncated page', () => {
    const result = parseListObjectsResult(
      answer(
        '<IsTruncated>true</IsTruncated>' +
          '<Contents><Key>r/a&amp;b &lt;c&gt; &#233;&#x1F600;</Key><LastModified>2026-11-22T10:00:00.000Z</LastModified><ETag>&quot;abc&quot;</ETag><Size>12</Size><Owner><ID>x</ID></Owner><StorageClass>STANDARD</StorageClass></Contents>' +
          '<Contents><Key>r/Prefix</Key><LastModified>2026-11-22T10:00:01.000Z</LastModified><ETag>"def"</ETag><Size>0</Size></Contents>' +
          '<CommonPrefixes><Prefix>r/d&apos;x/</Prefix></CommonPrefixes>' +
          '<NextContinuationToken>tok+/=</NextContinuationToken><KeyCount>3</KeyCount>',
      ),
    );
    expect(result.objects).toEqual([
      { key: 'r/a&b <c> é\u{1F600}', size: 12, etag: '"abc"', lastModified: new Date('2026-11-22T10:00:00.000Z') },
      { key: 'r/Prefix', size: 0, etag: '"def"', lastModified: new Date('2026-11-22T10:00:01.000Z') },
    ]);
    expect(result.commonPrefixes).toEqual(["r/d'x/"]);
    expect(result.isTruncated).toBe(true);
    expect(result.nextContinuationToken).toBe('tok+/=');
  });

  it('reads an empty, complete page', () => {
    expect(parseListObjectsResult(answer('<KeyCount>0</KeyCount><IsTruncated>false</IsTruncated>'))).toEqual({
      objects: [],
      commonPrefixes: [],
      isTruncated: false,
    });
  });

  it('refuses an answer that is not a listing', () => {
    expect(() => parseListObjectsResult('<Error><Code>AccessDenied</Code></Error>')).toThrow(/not a ListObjectsV2 answer/);
  });

  it('leaves unknown entities as they are', () => {
    expect(decodeXmlText('&nbsp;&amp;amp;')).toBe('&nbsp;&amp;');
  });
});

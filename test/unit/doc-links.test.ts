import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// Every relative link of the documentation (README.md, CONTRIBUTING.md, docs/**/*.md) leads to a
// file of the repository, and a link with an anchor to a heading of that page, as GitHub renders
// them: a moved section or a renamed file fails here, not in a reader's browser.

const repo = path.join(import.meta.dirname, '../..');

/** The documentation's pages, relative to the repository. */
function pages(): string[] {
  const found = ['README.md', 'CONTRIBUTING.md'].filter((file) => existsSync(path.join(repo, file)));
  const walk = (dir: string): void => {
    for (const entry of readdirSync(path.join(repo, dir), { withFileTypes: true })) {
      const file = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(file);
      else if (entry.name.endsWith('.md')) found.push(file);
    }
  };
  walk('docs');
  return found;
}

/** The lines of a page outside fenced code blocks (``` or ~~~), with their line numbers. */
function prose(text: string): Array<{ line: string; number: number }> {
  const out: Array<{ line: string; number: number }> = [];
  let fence: string | null = null;
  text.split('\n').forEach((line, i) => {
    const opening = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence === null && opening) fence = opening.slice(0, 3);
    else if (fence !== null && line.trim().startsWith(fence)) fence = null;
    else if (fence === null) out.push({ line, number: i + 1 });
  });
  return out;
}

/**
 * GitHub's anchor of a heading (github-slugger): the rendered text (a link's text, no markup) in
 * lower case, without punctuation or symbols but `-` and `_`, spaces as hyphens; a repeated one
 * gets `-1`, `-2`, ...
 */
function headingAnchors(text: string): string[] {
  const seen = new Map<string, number>();
  const anchors: string[] = [];
  for (const { line } of prose(text)) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const rendered = heading.replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1');
    const base = rendered
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.push(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

interface Link {
  page: string;
  number: number;
  target: string;
}

/** The relative links and images of a page (not in code), as written. */
function relativeLinks(page: string, text: string): Link[] {
  const links: Link[] = [];
  for (const { line, number } of prose(text)) {
    const outsideCode = line.replace(/(`+)[^`]*?\1/g, '');
    for (const match of outsideCode.matchAll(/!?\[(?:[^\]]|\][^(])*?\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = match[1] ?? '';
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      links.push({ page, number, target });
    }
  }
  return links;
}

/** What is wrong with a link, or null. */
function brokenLink(link: Link, read: (file: string) => string): string | null {
  const [file = '', anchor] = link.target.split('#', 2);
  const target = file === '' ? link.page : path.posix.normalize(path.posix.join(path.posix.dirname(link.page), decodeURI(file)));
  if (target.startsWith('../') || path.isAbsolute(target)) return `${link.target} leaves the repository`;
  if (!existsSync(path.join(repo, target))) return `${target} does not exist`;
  if (anchor === undefined) return null;
  if (!target.endsWith('.md') || statSync(path.join(repo, target)).isDirectory()) return `${link.target}: an anchor into a file that is not a Markdown page`;
  return headingAnchors(read(target)).includes(anchor) ? null : `${target} has no heading #${anchor}`;
}

describe('the documentation', () => {
  const cache = new Map<string, string>();
  const read = (file: string): string => {
    let text = cache.get(file);
    if (text === undefined) {
      text = readFileSync(path.join(repo, file), 'utf8');
      cache.set(file, text);
    }
    return text;
  };

  it('anchors are made as GitHub makes them', () => {
    const page = [
      '# Lance Namespace Service',
      "### The store's word",
      '## `npm run bench:console`',
      '```',
      '# not a heading',
      '```',
      '## Limits',
      '## Limits',
      '### [Spark](x.md) & co.',
    ].join('\n');
    expect(headingAnchors(page)).toEqual(['lance-namespace-service', 'the-stores-word', 'npm-run-benchconsole', 'limits', 'limits-1', 'spark--co']);
  });

  it('every relative link leads to a file that exists, and every anchor to a heading of its page', () => {
    const links = pages().flatMap((page) => relativeLinks(page, read(page)));
    expect(links.length).toBeGreaterThan(20);
    const broken = links.flatMap((link) => {
      const wrong = brokenLink(link, read);
      return wrong === null ? [] : [`${link.page}:${link.number}: ${wrong}`];
    });
    expect(broken).toEqual([]);
  });
});

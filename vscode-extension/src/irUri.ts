// URIs of the read-only IR documents. This module does not import `vscode`.
//
//   kdsl-ir:/<source file name>.<function>.<stage><ext>?source=<uri>&function=<name>&stage=<stage>
//
// The path only gives the editor tab a readable title and a file extension
// (the stage's `extension` in the server's stage table, `kdsl/capabilities`);
// the query holds the data and is what parsing reads. Query values are
// percent-encoded with encodeURIComponent. Which stages exist is the server's
// to say: a URI naming a stage it does not know gets a page saying so.

export const IR_SCHEME = 'kdsl-ir';

export interface IrTarget {
  /** URI (string form) of the Python source document. */
  sourceUri: string;
  functionName: string;
  stage: string;
}

/** The components of an IR document URI, as taken by `vscode.Uri.from`. */
export interface IrUriComponents {
  scheme: string;
  path: string;
  query: string;
}

/** Replaces characters that have a meaning in a URI path or are invisible. */
function sanitizeSegment(value: string): string {
  // eslint-disable-next-line no-control-regex
  return value.replace(/[\/\\?#%\u0000-\u001f\u007f]/g, '_');
}

/** The source file's name without its `.py`/`.pyi`/`.pyw` extension. */
export function sourceBaseName(sourceUri: string): string {
  let rest = sourceUri;
  const cut = rest.search(/[?#]/);
  if (cut >= 0) {
    rest = rest.slice(0, cut);
  }
  const slash = rest.lastIndexOf('/');
  let name = slash >= 0 ? rest.slice(slash + 1) : rest.slice(rest.indexOf(':') + 1);
  try {
    name = decodeURIComponent(name);
  } catch {
    // keep the raw text when it is not valid percent-encoding
  }
  name = name.replace(/\.py[iw]?$/i, '');
  return sanitizeSegment(name) || 'source';
}

/** `extension` is the stage's file extension with its dot (`.ll`), or '' for none. */
export function buildIrUri(target: IrTarget, extension: string): IrUriComponents {
  const ext = extension === '' ? '' : `.${sanitizeSegment(extension.replace(/^\./, ''))}`;
  const name = [sourceBaseName(target.sourceUri), sanitizeSegment(target.functionName), sanitizeSegment(target.stage)].join('.') + ext;
  const query = [
    `source=${encodeURIComponent(target.sourceUri)}`,
    `function=${encodeURIComponent(target.functionName)}`,
    `stage=${encodeURIComponent(target.stage)}`,
  ].join('&');
  return { scheme: IR_SCHEME, path: `/${name}`, query };
}

/** Reads the target back from a URI's scheme and (decoded) query; undefined when it is not an IR URI. */
export function parseIrUri(components: { scheme: string; query: string }): IrTarget | undefined {
  if (components.scheme !== IR_SCHEME) {
    return undefined;
  }
  const values = new Map<string, string>();
  for (const part of components.query.split('&')) {
    const eq = part.indexOf('=');
    if (eq < 0) {
      continue;
    }
    try {
      values.set(decodeURIComponent(part.slice(0, eq)), decodeURIComponent(part.slice(eq + 1)));
    } catch {
      return undefined;
    }
  }
  const sourceUri = values.get('source');
  const functionName = values.get('function');
  const stage = values.get('stage');
  if (!sourceUri || !functionName || !stage) {
    return undefined;
  }
  return { sourceUri, functionName, stage };
}

/** The string form `kdsl-ir:<path>?<query>` (path percent-encoded). */
export function formatIrUri(target: IrTarget, extension: string): string {
  const c = buildIrUri(target, extension);
  const path = c.path
    .split('/')
    .map((segment) => encodeURIComponent(segment))
    .join('/');
  return `${c.scheme}:${path}?${c.query}`;
}

/** Parses the string form made by formatIrUri. */
export function parseIrUriString(uri: string): IrTarget | undefined {
  const colon = uri.indexOf(':');
  if (colon < 0) {
    return undefined;
  }
  const scheme = uri.slice(0, colon);
  const afterScheme = uri.slice(colon + 1);
  const q = afterScheme.indexOf('?');
  if (q < 0) {
    return undefined;
  }
  let query = afterScheme.slice(q + 1);
  const hash = query.indexOf('#');
  if (hash >= 0) {
    query = query.slice(0, hash);
  }
  return parseIrUri({ scheme, query });
}

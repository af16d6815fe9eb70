// What the server can show and its defaults (`kdsl/capabilities`), asked once per
// server and kept. The stage pickers, the IR documents' languages and file
// extensions and the list of targets all come from here: the extension keeps no
// copy of the server's stage table or targets. This module does not import `vscode`.

import { CAPABILITIES_REQUEST, type Capabilities, type StageInfo } from './protocol';
import { SETTING_FIELDS, type KdslSettings, type SettingKey } from './settings';

/** The part of a LanguageClient this module uses (tests pass a fake). */
export interface RequestClient {
  sendRequest<R>(method: string): Promise<R>;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isStageInfo(value: unknown): value is StageInfo {
  return (
    isRecord(value) &&
    typeof value.name === 'string' &&
    value.name !== '' &&
    typeof value.language === 'string' &&
    typeof value.extension === 'string' &&
    value.binary !== true
  );
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

/**
 * Checks a `kdsl/capabilities` answer; throws when it lists no stage (a server
 * too old to answer gives null). Binary stages and malformed entries are left out.
 */
export function parseCapabilities(raw: unknown): Capabilities {
  const v = isRecord(raw) ? raw : {};
  const stages = (Array.isArray(v.stages) ? v.stages : []).filter(isStageInfo).map((s) => ({
    name: s.name,
    language: s.language,
    extension: s.extension,
    binary: false,
    needsViews: s.needsViews !== false,
    madeBy: typeof s.madeBy === 'string' ? s.madeBy : 'pipeline',
  }));
  if (stages.length === 0) {
    throw new Error(`the kdsl language server did not list its stages (${CAPABILITIES_REQUEST}); is kdsl up to date?`);
  }
  const choices: Record<string, string[]> = {};
  for (const [key, values] of Object.entries(isRecord(v.choices) ? v.choices : {})) {
    choices[key] = strings(values);
  }
  return {
    stages,
    targets: strings(v.targets),
    defaultTarget: typeof v.defaultTarget === 'string' ? v.defaultTarget : '',
    settings: isRecord(v.settings) ? { ...v.settings } : {},
    choices,
  };
}

/**
 * The answer of one server, asked for on first use. A new client (the server
 * restarted) is asked again; a failed request is asked again next time.
 */
export class CapabilitiesCache {
  private entry: { client: RequestClient; answer: Promise<Capabilities> } | undefined;
  private latest: Capabilities | undefined;

  get(client: RequestClient): Promise<Capabilities> {
    if (this.entry?.client !== client) {
      const answer = client.sendRequest<unknown>(CAPABILITIES_REQUEST).then(parseCapabilities);
      const entry = { client, answer };
      this.entry = entry;
      answer.then(
        (capabilities) => {
          if (this.entry === entry) {
            this.latest = capabilities;
          }
        },
        () => {
          if (this.entry === entry) {
            this.entry = undefined;
          }
        },
      );
    }
    return this.entry.answer;
  }

  /** The last answer received, also while no server runs (for labelling error pages). */
  get known(): Capabilities | undefined {
    return this.latest;
  }
}

export function stageNamed(capabilities: Capabilities | undefined, name: unknown): StageInfo | undefined {
  return typeof name === 'string' ? capabilities?.stages.find((s) => s.name === name) : undefined;
}

function show(value: unknown): string {
  return JSON.stringify(value) ?? String(value);
}

/**
 * What to tell the user about their settings once the server has answered:
 * `warnings` for values the server does not know, `notes` for defaults of
 * package.json that differ from the server's (an extension and a server of
 * different versions).
 */
export function compareSettings(
  capabilities: Capabilities,
  settings: KdslSettings,
  defaults: Readonly<KdslSettings>,
): { warnings: string[]; notes: string[] } {
  const warnings: string[] = [];
  const notes: string[] = [];
  if (settings.target !== '' && !capabilities.targets.includes(settings.target)) {
    warnings.push(
      `kdsl.target "${settings.target}" is not a target of this kdsl server (${capabilities.targets.join(', ')}).`,
    );
  }
  for (const [key, serverDefault] of Object.entries(capabilities.settings)) {
    if (!(key in SETTING_FIELDS)) {
      continue;
    }
    const field = SETTING_FIELDS[key as SettingKey];
    const choices = capabilities.choices[key];
    if (choices !== undefined && key !== 'target' && !choices.includes(String(settings[field]))) {
      warnings.push(`kdsl.${key} "${settings[field]}" is not one of ${choices.join(', ')} for this kdsl server.`);
    }
    if (defaults[field] !== serverDefault) {
      notes.push(`kdsl.${key}: the server's default is ${show(serverDefault)}, the extension's ${show(defaults[field])}.`);
    }
  }
  return { warnings, notes };
}

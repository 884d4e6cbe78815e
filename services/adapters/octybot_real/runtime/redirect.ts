// memrig's network shim for octybot-real, loaded with `bun --preload` before Octybot's own hook code (which is run
// unmodified from ../shared/third_party/octybot). Octybot calls its services at fixed URLs (Voyage embeddings,
// OpenRouter chat); this replaces `globalThis.fetch` with one that sends each URL starting with a configured prefix to
// the rig's local stand-in instead, and refuses every other non-loopback URL, so a run never leaves the machine.
// MEMRIG_OCTYBOT_ROUTES: a JSON list of [fromPrefix, toPrefix] pairs.
const routes: Array<[string, string]> = JSON.parse(process.env.MEMRIG_OCTYBOT_ROUTES ?? "[]");
const realFetch = globalThis.fetch.bind(globalThis);

function urlOf(input: unknown): string {
  if (typeof input === "string") return input;
  if (input instanceof URL) return input.href;
  if (input instanceof Request) return input.url;
  return String(input);
}

function loopback(url: string): boolean {
  try {
    const h = new URL(url).hostname;
    return h === "127.0.0.1" || h === "localhost" || h === "[::1]" || h === "::1";
  } catch {
    return false;
  }
}

const shim = (input: any, init?: any): Promise<Response> => {
  const url = urlOf(input);
  for (const [from, to] of routes) {
    if (url.startsWith(from)) {
      const target = to + url.slice(from.length);
      return input instanceof Request ? realFetch(new Request(target, input), init) : realFetch(target, init);
    }
  }
  if (!loopback(url)) {
    return Promise.reject(new Error(`memrig octybot-real: ${url} is not served by the rig (network calls stay local)`));
  }
  return realFetch(input, init);
};
globalThis.fetch = Object.assign(shim, realFetch) as typeof fetch;

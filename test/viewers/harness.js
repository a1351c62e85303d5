// What firefox_view.js and pprof_view.js share: reading the spec, the
// headless Chromium they launch, the static file servers, the errors a page
// reports, and the run itself (ONE JSON report on stdout, the hard time
// limit, and a shutdown that cannot hang). test/support/browser_run.rb runs
// those scripts.
'use strict';

const fs = require('fs');
const http = require('http');
const path = require('path');

const REPO = path.resolve(__dirname, '..', '..');

const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.ftl': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.gz': 'application/gzip',
  '.webmanifest': 'application/manifest+json',
};

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The spec: JSON in the first argument, or on stdin when there is none (or
// it is "-"). fromArg, if given, makes a spec of an argument that is not
// JSON (a bare path).
function readSpec(fromArg) {
  const arg = process.argv[2];
  let text;
  if (arg === undefined || arg === '-') text = fs.readFileSync(0, 'utf8');
  else if (!fromArg || arg.trim().startsWith('{')) text = arg;
  else return fromArg(arg);
  return JSON.parse(text);
}

// The browser binary the spec names (default: $CHROMIUM or /usr/bin/chromium).
function chromiumPath(spec) {
  const chromium = spec.chromium || process.env.CHROMIUM || '/usr/bin/chromium';
  if (!fs.existsSync(chromium)) throw new Error(`no browser at ${chromium} (apt-get install chromium)`);
  return chromium;
}

// Where the screenshots go (default: <repo>/tmp/viewers), made if need be.
function screenshotDir(spec) {
  const dir = path.resolve(spec.screenshot_dir || path.join(REPO, 'tmp', 'viewers'));
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

// Headless Chromium, kept in state.browser for finish() to close.
async function launchBrowser(chromium, state) {
  const puppeteer = require('puppeteer-core');
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-extensions',
           '--disable-background-networking', '--disable-dev-shm-usage'],
    defaultViewport: { width: 1600, height: 1000 },
  });
  state.browser = browser;
  return browser;
}

// Records what goes wrong on the page (console errors and warnings, page
// errors, failed requests and HTTP errors) in the object target() returns
// at that moment (nothing when it returns null). Console messages that
// match `ignore` are dropped.
function watchPage(page, target, ignore = null) {
  page.on('console', (msg) => {
    const t = target();
    if (!t || (ignore && ignore.test(msg.text()))) return;
    if (msg.type() === 'error') t.console_errors.push(msg.text());
    else if (msg.type() === 'warn' || msg.type() === 'warning') t.console_warnings.push(msg.text());
  });
  page.on('pageerror', (err) => {
    const t = target();
    if (t) t.page_errors.push(String(err && err.message ? err.message : err));
  });
  page.on('requestfailed', (req) => {
    const t = target();
    const f = req.failure();
    if (t) t.failed_requests.push(`${req.url()}: ${f ? f.errorText : 'failed'}`);
  });
  page.on('response', (res) => {
    const t = target();
    if (t && res.status() >= 400) t.failed_requests.push(`${res.url()}: HTTP ${res.status()}`);
  });
}

// An HTTP server on 127.0.0.1 and a free port, once it listens.
function listen(handler) {
  return new Promise((resolve, reject) => {
    const server = http.createServer(handler);
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

// The request's path, decoded; null when it cannot be.
function requestPath(req) {
  try {
    return decodeURIComponent(new URL(req.url, 'http://x').pathname);
  } catch (_e) {
    return null;
  }
}

// True when `file` is a file (not absent, not a directory).
function isFile(file) {
  try {
    return fs.statSync(file).isFile();
  } catch (_e) {
    return false;
  }
}

// The file under `root` that the path `rel` names, or null (none, or
// outside root).
function fileUnder(root, rel) {
  if (rel === null) return null;
  const file = path.join(root, path.normalize(rel));
  return file.startsWith(root + path.sep) && isFile(file) ? file : null;
}

// A static server (see listen): each request gets the file route(req)
// returns, or 404 for null; nothing is cached.
function serveFiles(route) {
  return listen((req, res) => {
    const file = route(req);
    res.setHeader('Cache-Control', 'no-store');
    if (!file) {
      res.statusCode = 404;
      return res.end('not found');
    }
    res.setHeader('Content-Type', MIME[path.extname(file)] || 'application/octet-stream');
    fs.createReadStream(file).pipe(res);
  });
}

// Runs main(spec, out, state) and prints `out` as ONE JSON line, with ok and
// error (the stack of what main threw) and timings.total_ms, then closes
// the browser (or kills it after 3 s) and the servers main put in state and
// exits: 0 when main finished, 1 when it threw or the spec was bad, 2 when
// spec.timeout_ms (default 60000) ran out first. `script` names the script
// in the timeout's message; fromArg: see readSpec.
function run(script, out, main, { fromArg } = {}) {
  const started = Date.now();
  const state = { browser: null, servers: [] };
  let printed = false;
  const finish = (code, error) => {
    if (printed) return;
    printed = true;
    if (error) out.error = error;
    out.ok = code === 0;
    out.timings.total_ms = Date.now() - started;
    process.stdout.write(`${JSON.stringify(out)}\n`, () => {
      const close = state.browser ? state.browser.close().catch(() => {}) : Promise.resolve();
      Promise.race([close, sleep(3000)]).then(() => {
        if (state.browser && state.browser.process()) state.browser.process().kill('SIGKILL');
        state.servers.forEach((s) => s.close());
        process.exit(code);
      });
    });
  };

  let spec;
  try {
    spec = readSpec(fromArg);
    if (spec === null || typeof spec !== 'object') throw new Error('not a JSON object');
  } catch (e) {
    finish(1, `bad spec: ${e.message}`);
    return;
  }
  const timeout = Number(spec.timeout_ms || 60000);
  setTimeout(() => finish(2, `timed out after ${timeout} ms (${script} hard limit)`), timeout).unref();
  main(spec, out, state).then(() => finish(0), (e) => finish(1, e && e.stack ? e.stack : String(e)));
}

module.exports = {
  REPO, MIME, sleep, chromiumPath, screenshotDir, launchBrowser, watchPage,
  listen, requestPath, isFile, fileUnder, serveFiles, run,
};

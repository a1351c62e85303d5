#!/usr/bin/env node
// Opens Fathom's pprof files as a person would, in headless Chromium (one
// browser for every page of a run), and prints ONE JSON object to stdout
// describing what each page shows. test/support/pprof_viewer.rb runs it;
// what it shares with firefox_view.js is in harness.js.
//
// Two viewers:
//   - pprof's own web UI (`go tool pprof -http`): the caller starts the
//     servers and passes their URLs; kinds "graph" (/ui/, the svg that dot
//     draws), "top" (/ui/top) and "flamegraph" (/ui/flamegraph).
//   - speedscope (npm package `speedscope`, its built app under
//     node_modules/speedscope/dist/release): this script serves that
//     directory and the profile from one local HTTP server and opens
//     index.html#profileURL=<the profile's URL>, the documented way to load
//     a file by URL (speedscope's README, "Importing via URL"). Kind
//     "speedscope".
//
// Usage:
//   echo '{"pages": [{"name": "heap-top", "kind": "top", "url": "http://127.0.0.1:8080/ui/top"}]}' | node pprof_view.js
//
// Spec keys:
//   pages          [{name, kind, url}] for pprof; [{name, kind: "speedscope",
//                  profile: path, find: [names]}] for speedscope
//   screenshot_dir where PNGs go (default: <repo>/tmp/viewers)
//   chromium       browser binary (default: $CHROMIUM or /usr/bin/chromium)
//   timeout_ms     hard limit for the whole run (default 60000)
//
// Report: {ok, browser, pages: {NAME: {...}}, timings}; each page has url,
// status (the document's HTTP status), title, text (the page's visible text),
// errors_text (pprof's error box), console_errors, page_errors,
// failed_requests, screenshots, load_ms, and per kind:
//   graph       svg_count, nodes: [{lines: [text lines], tooltip}]
//   top         rows: [{flat, flat_percent, sum_percent, cum, cum_percent, name}]
//   flamegraph  frames: [{name, title, width, label, label_shown}]
//   speedscope  rows (the sandwich table as first shown), found: {NAME: rows
//               the search box left for NAME}, timings
// Screenshots: <screenshot_dir>/<name>.png for a pprof page; for speedscope
// <name>-sandwich.png (the first name found, its row selected) and
// <name>-left-heavy.png (the flame graph).
//
// Exit status: 0 with the report; 1 with {"error": ...} (and whatever was
// gathered) when a page could not be read; 2 on the hard timeout.
'use strict';

const path = require('path');
const {
  sleep, chromiumPath, screenshotDir, launchBrowser, watchPage, isFile, fileUnder, requestPath, serveFiles, run,
} = require('./harness');

const SPEEDSCOPE_DIR = path.join(__dirname, 'node_modules', 'speedscope', 'dist', 'release');

// speedscope's static app at /, and the profiles at /profiles/<i>/<name>:
// one origin, so the page's fetch of the profile needs no CORS.
function serveSpeedscope(profiles) {
  return serveFiles((req) => {
    const rel = requestPath(req);
    if (rel === null) return null;
    const m = rel.match(/^\/profiles\/(\d+)\//);
    if (m) {
      const file = profiles[Number(m[1])];
      return file && isFile(file) ? file : null;
    }
    return fileUnder(SPEEDSCOPE_DIR, rel === '/' ? '/index.html' : rel);
  });
}

// ---- code run in the page -------------------------------------------------

function pageCommon() {
  const errors = document.getElementById('errors');
  return {
    title: document.title,
    text: document.body ? document.body.innerText : '',
    errors_text: errors ? errors.innerText.trim() : null,
  };
}

// pprof's graph view: the svg dot drew, one <g class="node"> per node (a
// function, or a box of labels hanging under one), its label in <text> lines.
function pageGraph() {
  const svgs = document.querySelectorAll('#graph svg');
  const nodes = [...document.querySelectorAll('#graph svg g.node')].map((g) => {
    const a = g.querySelector('a');
    return {
      lines: [...g.querySelectorAll('text')].map((t) => t.textContent),
      tooltip: a ? a.getAttribute('xlink:title') || a.getAttribute('title') : null,
    };
  });
  return { svg_count: svgs.length, nodes };
}

function pageTop() {
  const keys = ['flat', 'flat_percent', 'sum_percent', 'cum', 'cum_percent', 'name'];
  const rows = [...document.querySelectorAll('#toptable tbody tr')].map((tr) => {
    const cells = [...tr.querySelectorAll('td')].map((td) => td.innerText.trim());
    const row = {};
    keys.forEach((k, i) => { row[k] = cells[i] === undefined ? null : cells[i]; });
    return row;
  });
  return { rows };
}

// pprof's d3 flame graph: one <g class="frame"> per frame; its label (a div
// in a foreignObject, hidden when the frame is under 35 px wide) shows the
// name pprof shortened, its <title> (the tooltip) the full name.
function pageFlamegraph() {
  const frames = [...document.querySelectorAll('#chart svg g.frame')].map((g) => {
    const label = g.querySelector('.d3-flame-graph-label');
    const title = g.querySelector('title');
    return {
      name: g.getAttribute('name'),
      title: title ? title.textContent : null,
      width: Math.round(g.getBoundingClientRect().width * 10) / 10,
      label: label ? label.textContent : null,
      label_shown: label ? getComputedStyle(label).display !== 'none' : false,
    };
  });
  return { frames };
}

// speedscope's sandwich table: each <tr> of the list holds Total, Self and
// the symbol's name (its class names are generated: read by structure).
function pageSandwichRows() {
  return [...document.querySelectorAll('tr')]
    .map((tr) => [...tr.querySelectorAll('td')])
    .filter((tds) => tds.length === 3)
    .map((tds) => ({ total: tds[0].innerText.trim(), self: tds[1].innerText.trim(), name: tds[2].innerText.trim() }));
}

// ---- driver ---------------------------------------------------------------

async function readPprofPage(page, spec, result) {
  const response = await page.goto(spec.url, { waitUntil: 'load', timeout: 20000 });
  result.status = response ? response.status() : null;
  if (result.status === 200) {
    if (spec.kind === 'graph') {
      await page.waitForSelector('#graph svg g.node', { timeout: 10000 }).catch(() => null);
    } else if (spec.kind === 'top') {
      await page.waitForSelector('#toptable tbody tr', { timeout: 10000 }).catch(() => null);
    } else if (spec.kind === 'flamegraph') {
      // d3 writes the labels after its 750 ms transition: wait until the
      // shown ones have their text, then for the bars to reach full width.
      await page.waitForFunction(() => {
        const labels = [...document.querySelectorAll('#chart .d3-flame-graph-label')];
        return labels.length > 0 && labels.filter((l) => l.style.display !== 'none').every((l) => l.textContent !== '');
      }, { timeout: 10000, polling: 100 }).catch(() => null);
      await sleep(150);
    }
  }
  Object.assign(result, await page.evaluate(pageCommon));
  if (result.status === 200) {
    const reader = { graph: pageGraph, top: pageTop, flamegraph: pageFlamegraph }[spec.kind];
    Object.assign(result, await page.evaluate(reader));
  }
  const shot = path.join(result.shot_dir, `${result.name}.png`);
  await page.screenshot({ path: shot, optimizeForSpeed: true });
  result.screenshots.push(shot);
}

// speedscope draws its flame graphs with WebGL on a <canvas>: no text in the
// DOM to read there. Its Sandwich view is an HTML table, one row per
// function with its Total and Self weight and its name as text, which is
// what a person reads; the table is virtualised (only rows scrolled into
// view exist), so each name goes into speedscope's own search box (Ctrl+F,
// then the name pasted; it filters the table to the functions whose names
// match, as a person would look one up) and we read the rows it leaves. The tests then
// compare names exactly, so a damaged name ("[ruby]", a cut "Foo::Bar")
// cannot pass for a fuzzy match.
async function readSpeedscope(page, spec, result, ctx) {
  const index = ctx.profiles.push(path.resolve(spec.profile)) - 1;
  const profileUrl = `${ctx.base}/profiles/${index}/${encodeURIComponent(path.basename(spec.profile))}`;
  // ?file=<index>: a new document for each file (a change of the hash alone
  // does not make speedscope load another profile).
  const url = `${ctx.base}/index.html?file=${index}#profileURL=${encodeURIComponent(profileUrl)}&view=sandwich`;
  result.url = url;
  const response = await page.goto(url, { waitUntil: 'load', timeout: 20000 });
  result.status = response ? response.status() : null;
  const settled = await page.waitForFunction(() => {
    if ([...document.querySelectorAll('tr')].some((tr) => tr.querySelectorAll('td').length === 3)) return 'table';
    const text = document.body ? document.body.innerText : '';
    if (/something went wrong|unrecognized format|failed to load|error/i.test(text)) return `error: ${text}`;
    return false;
  }, { timeout: 20000, polling: 100 }).then((h) => h.jsonValue())
    .catch((e) => `error: no sandwich table within 20 s (${e.message})`);
  Object.assign(result, await page.evaluate(pageCommon));
  const t0 = Date.now();
  result.timings = { open_ms: null, search_ms: null };
  result.timings.open_ms = t0 - ctx.pageStarted;
  if (settled !== 'table') {
    const shot = path.join(result.shot_dir, `${result.name}-error.png`);
    await page.screenshot({ path: shot, optimizeForSpeed: true });
    result.screenshots.push(shot);
    throw new Error(`speedscope did not show ${spec.profile}: ${settled.replace(/^error: /, '').replace(/\s+/g, ' ').trim().slice(0, 500)}`);
  }
  result.rows = await page.evaluate(pageSandwichRows);
  result.found = {};
  const find = spec.find || [];
  // One query: open the box (Ctrl+F), replace what it holds, and insert the
  // name as one edit (a paste: speedscope filters once, not per keystroke).
  const search = async (name) => {
    await page.keyboard.press('Escape');
    await page.keyboard.down('Control');
    await page.keyboard.press('f');
    await page.keyboard.up('Control');
    await sleep(100);
    await page.keyboard.down('Control');
    await page.keyboard.press('a');
    await page.keyboard.up('Control');
    if (name === '') await page.keyboard.press('Backspace');
    else await page.evaluate((text) => document.execCommand('insertText', false, text), name);
    await sleep(250);
    return page.evaluate(pageSandwichRows);
  };
  // The first name's row clicked: the sandwich then shows its callers above
  // and its callees below (the screenshot).
  for (const [i, name] of find.entries()) {
    result.found[name] = await search(name);
    if (i > 0) continue;
    const cell = await page.evaluateHandle((text) => {
      const tds = [...document.querySelectorAll('td')];
      return tds.find((td) => td.innerText.trim() === text) || tds.find((td) => td.innerText.includes(text)) || null;
    }, name);
    const el = cell.asElement();
    if (el) {
      await el.click();
      await sleep(300);
    }
    const sandwich = path.join(result.shot_dir, `${result.name}-sandwich.png`);
    await page.screenshot({ path: sandwich, optimizeForSpeed: true });
    result.screenshots.push(sandwich);
  }
  result.timings.search_ms = Date.now() - t0;
  // The Left Heavy tab (the flame graph, canvas only): for the screenshot,
  // with the search emptied (a query would fade every frame it misses).
  await search('');
  await page.keyboard.press('Escape');
  const tab = await page.evaluateHandle(() => [...document.querySelectorAll('div')]
    .find((d) => /Left Heavy$/.test(d.innerText.trim()) && d.children.length <= 1) || null);
  const tabEl = tab.asElement();
  if (tabEl) {
    await tabEl.click();
    await sleep(500);
    const flame = path.join(result.shot_dir, `${result.name}-left-heavy.png`);
    await page.screenshot({ path: flame, optimizeForSpeed: true });
    result.screenshots.push(flame);
  }
}

async function main(spec, out, state) {
  const pages = spec.pages || [];
  if (pages.length === 0) throw new Error('spec needs "pages"');
  const chromium = chromiumPath(spec);
  const shotDir = screenshotDir(spec);

  const ctx = { profiles: [], base: null };
  if (pages.some((p) => p.kind === 'speedscope')) {
    if (!isFile(path.join(SPEEDSCOPE_DIR, 'index.html'))) {
      throw new Error(`no speedscope app at ${SPEEDSCOPE_DIR} (npm ci --prefix test/viewers)`);
    }
    const server = await serveSpeedscope(ctx.profiles);
    state.servers.push(server);
    ctx.base = `http://127.0.0.1:${server.address().port}`;
  }

  const browser = await launchBrowser(chromium, state);
  out.browser = await browser.version();
  const page = await browser.newPage();

  // What goes wrong is charged to the page being read.
  let current = null;
  watchPage(page, () => current);

  for (const p of pages) {
    if (!p.name || !/^[A-Za-z0-9._-]+$/.test(p.name)) throw new Error(`page name ${JSON.stringify(p.name)}: letters, digits, . _ - only`);
    const result = {
      name: p.name, kind: p.kind, url: p.url || null, status: null, title: null, text: null, errors_text: null,
      console_errors: [], console_warnings: [], page_errors: [], failed_requests: [], screenshots: [],
      shot_dir: shotDir, load_ms: null,
    };
    out.pages[p.name] = result;
    current = result;
    const t0 = Date.now();
    ctx.pageStarted = t0;
    if (p.kind === 'speedscope') await readSpeedscope(page, p, result, ctx);
    else if (['graph', 'top', 'flamegraph'].includes(p.kind)) await readPprofPage(page, p, result);
    else throw new Error(`page ${p.name}: unknown kind ${JSON.stringify(p.kind)}`);
    result.load_ms = Date.now() - t0;
    delete result.shot_dir;
  }
  current = null;
}

const out = { ok: false, browser: null, pages: {}, timings: {} };
run('pprof_view.js', out, main);

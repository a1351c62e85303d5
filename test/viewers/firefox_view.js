#!/usr/bin/env node
// Opens a Fathom Firefox-format profile (.json or .json.gz, "processed"
// format) in the real Firefox Profiler web app (the static build in
// ../shared/viewers/firefox-profiler beside the repo checkout) in headless
// Chromium, and prints ONE JSON object to stdout describing what the page
// shows: the timeline's thread tracks (name, thread index, activity-graph
// pixels, hatched "empty" regions), the expanded call tree and the sidebar's
// category breakdown of each requested thread, console and page errors, and
// the screenshots it took. test/support/firefox_viewer.rb runs it; what it
// shares with pprof_view.js is in harness.js.
//
// Usage:
//   node firefox_view.js '{"profile": "tmp/viewers/app.json.gz", "threads": [1, "sleeper"]}'
//   echo '{"profile": "..."}' | node firefox_view.js
//   node firefox_view.js path/to/profile.json.gz        (all thread tracks)
//
// Spec keys:
//   profile       path of the profile file (required)
//   threads       call trees to read: thread indexes, or thread names as the
//                 file spells them (default: every thread track shown)
//   ct_summary    call tree summary strategy, e.g. "js-allocations"
//   screenshot_dir  where PNGs go (default: <repo>/tmp/viewers)
//   name          screenshot file name prefix (default: the profile's name)
//   viewer_dir    the firefox-profiler build (default:
//                 $FATHOM_FIREFOX_PROFILER_DIR or <repo>/../shared/viewers/firefox-profiler)
//   chromium      browser binary (default: $CHROMIUM or /usr/bin/chromium)
//   timeout_ms    hard limit for the whole run (default 60000)
//   max_rows      call tree rows read per thread at most (default 3000)
//
// Exit status: 0 with the report; 1 with {"error": ...} (and whatever was
// gathered) when the page could not be read; 2 on the hard timeout.
'use strict';

const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const {
  REPO, sleep, chromiumPath, screenshotDir, launchBrowser, watchPage, listen, fileUnder, requestPath, serveFiles, run,
} = require('./harness');

// Static server for the web app: unknown paths answer index.html (it is a
// single-page app that routes /from-url/... itself).
function serveApp(root) {
  const index = path.join(root, 'index.html');
  return serveFiles((req) => fileUnder(root, requestPath(req)) || index);
}

// The profile, from another port (another origin), as a browser would fetch
// it from a server: the file's bytes, CORS open.
function serveProfile(file) {
  return listen((req, res) => {
    res.setHeader('Access-Control-Allow-Origin', '*');
    res.setHeader('Cache-Control', 'no-store');
    if (req.method === 'OPTIONS') return res.end();
    res.setHeader('Content-Type', file.endsWith('.gz') ? 'application/gzip' : 'application/json');
    fs.createReadStream(file).pipe(res);
  });
}

// The threads the file holds (index, name, tid, sample count): to resolve
// thread names in the spec, and for the caller's own comparisons.
function fileThreads(file) {
  let bytes = fs.readFileSync(file);
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) bytes = zlib.gunzipSync(bytes);
  const json = JSON.parse(bytes.toString('utf8'));
  if (!Array.isArray(json.threads)) throw new Error('"threads" is not an array');
  return json.threads.map((t, index) => ({
    index,
    name: t && t.name,
    tid: t && t.tid,
    samples: t && t.samples ? t.samples.length : 0,
  }));
}

// ---- code run in the page -------------------------------------------------

// Every track row of the timeline, in display order (global rows and the
// local rows under them), with what its activity graph canvas holds.
function pageTracks() {
  const rows = [...document.querySelectorAll('.timelineTrackRow')];
  return rows.map((row, position) => {
    const button = row.querySelector('.timelineTrackNameButton');
    const label = row.querySelector('.timelineTrackLabel');
    // The button's first text node is the name; a global track adds a
    // "PID: n" line in a child div.
    const name = button
      ? [...button.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE).map((n) => n.textContent).join('').trim()
      : null;
    const details = button && button.querySelector('.timelineTrackNameButtonAdditionalDetails');
    const thread = row.querySelector('.timelineTrackThread');
    const canvas = row.querySelector('canvas.threadActivityGraphCanvas');
    let activityPixels = null;
    let canvasPixels = null;
    if (canvas && canvas.width > 0 && canvas.height > 0) {
      const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      activityPixels = 0;
      for (let i = 3; i < data.length; i += 4) if (data[i] !== 0) activityPixels++;
      canvasPixels = canvas.width * canvas.height;
    }
    const track = row.querySelector('.timelineTrackTrack');
    const trackWidth = track ? track.getBoundingClientRect().width : 0;
    const empty = [...row.querySelectorAll('.timelineEmptyThreadIndicatorBlock')].map((el) => {
      const kind = [...el.classList].find((c) => c !== 'timelineEmptyThreadIndicatorBlock') || '';
      const width = el.getBoundingClientRect().width;
      return {
        kind: kind.replace('timelineEmptyThreadIndicator', ''), // EmptyBuffer, Startup, Shutdown
        width_px: Math.round(width * 10) / 10,
        fraction: trackWidth ? Math.round((width / trackWidth) * 1000) / 1000 : null,
      };
    });
    return {
      position,
      name,
      details: details ? details.textContent.trim() : null,
      title: label ? label.getAttribute('title') : null,
      global: row.classList.contains('timelineTrackGlobalRow'),
      kind: thread ? 'thread' : (track && track.firstElementChild ? track.firstElementChild.className || 'other' : 'other'),
      activity_pixels: activityPixels,
      canvas_pixels: canvasPixels,
      empty_regions: empty,
      hatched: empty.length > 0,
    };
  });
}

// Scrolls through the (virtualised) call tree and returns its rows in
// display order, at most maxRows.
async function pageTreeRows(maxRows) {
  const frame = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const body = document.querySelector('.treeViewBody');
  if (!body) return { rows: [], total: 0 };
  const inner0 = body.querySelector('.treeViewBodyInner0');
  const first = body.querySelector('.treeViewRowScrolledColumns');
  const rowHeight = first ? first.getBoundingClientRect().height || 16 : 16;
  const total = Math.round(parseFloat(inner0.style.height || '0') / rowHeight);
  const rows = new Map();
  const collect = () => {
    const spacer = body.querySelector('.treeViewBodyInner1TopSpacer');
    const offset = Math.round(parseFloat((spacer && spacer.style.height) || '0') / rowHeight);
    const fixed = [...body.querySelectorAll('.treeViewBodyInner0InnerChunk .treeViewRow')];
    const scrolled = [...body.querySelectorAll('.treeViewBodyInner1InnerChunk .treeViewRow')];
    scrolled.forEach((row, i) => {
      const pos = offset + i;
      if (rows.has(pos) || pos >= maxRows) return;
      const f = fixed[i];
      const col = (cls) => {
        const el = f && f.querySelector(`.${cls}`);
        return el ? el.textContent.trim() : null;
      };
      const text = (sel) => {
        const el = row.querySelector(sel);
        return el ? el.textContent.trim() : null;
      };
      const square = row.querySelector('.colored-square');
      rows.set(pos, {
        pos,
        id: row.id,
        level: Number(row.getAttribute('aria-level')),
        expanded: row.getAttribute('aria-expanded'),
        name: text('.treeViewMainColumn'),
        lib: text('.treeViewAppendageColumn'),
        category: square ? square.getAttribute('title') : null,
        total_percent: col('totalPercent'),
        total: col('total'),
        self: col('self'),
        label: row.getAttribute('aria-label'),
      });
    });
  };
  body.scrollTop = 0;
  await frame();
  collect();
  const limit = Math.min(total, maxRows);
  for (let guard = 0; rows.size < limit && guard < 1000; guard++) {
    let next = 0;
    while (rows.has(next)) next++;
    if (next >= limit) break;
    body.scrollTop = Math.max(0, next * rowHeight - rowHeight);
    await frame();
    const before = rows.size;
    collect();
    if (rows.size === before) {
      await frame();
      collect();
      if (rows.size === before) break; // nothing new renders: stop rather than spin
    }
  }
  body.scrollTop = 0;
  await frame();
  return { rows: [...rows.values()].sort((a, b) => a.pos - b.pos), total };
}

// Scrolls the call tree so that display row `pos` is rendered; returns the
// id of that row (treeViewRow-<call node index>), or null.
async function pageShowRow(pos) {
  const frame = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const body = document.querySelector('.treeViewBody');
  const first = body.querySelector('.treeViewRowScrolledColumns');
  const rowHeight = first ? first.getBoundingClientRect().height || 16 : 16;
  body.scrollTop = Math.max(0, pos * rowHeight - body.clientHeight / 2);
  await frame();
  const spacer = body.querySelector('.treeViewBodyInner1TopSpacer');
  const offset = Math.round(parseFloat((spacer && spacer.style.height) || '0') / rowHeight);
  const row = body.querySelectorAll('.treeViewBodyInner1InnerChunk .treeViewRow')[pos - offset];
  return row ? row.id : null;
}

// The sidebar of the call tree: its title and each section's rows.
function pageSidebar() {
  const aside = document.querySelector('.sidebar-calltree');
  if (!aside) return null;
  const title = aside.querySelector('.sidebar-title input');
  const sections = [];
  let current = { title: '', rows: [] };
  sections.push(current);
  let row = null;
  for (const el of aside.querySelectorAll('.sidebar-contents-wrapper > *')) {
    if (el.matches('h4')) {
      current = { title: el.innerText.replace(/\s*\n\s*/g, ' / ').trim(), rows: [] };
      sections.push(current);
    } else if (el.matches('.sidebar-label')) {
      row = { label: el.textContent.trim(), percentage: null, value: null };
      current.rows.push(row);
    } else if (row && el.matches('.sidebar-percentage')) {
      row.percentage = el.textContent.trim();
    } else if (row && el.matches('.sidebar-value')) {
      row.value = el.textContent.trim();
    }
  }
  const lines = [];
  for (const s of sections) {
    if (s.rows.length === 0) continue;
    if (s.title) lines.push(`${s.title}:`);
    for (const r of s.rows) lines.push(`  ${[r.label, r.percentage, r.value].filter((x) => x).join(' ')}`);
  }
  return {
    node: title ? title.value : null,
    sections: sections.filter((s) => s.rows.length > 0),
    text: lines.join('\n'),
  };
}

// ---- driver ---------------------------------------------------------------

async function main(spec, out, state) {
  if (!spec.profile) throw new Error('spec needs "profile": the path of a .json or .json.gz file');
  const profile = path.resolve(spec.profile);
  if (!fs.existsSync(profile)) throw new Error(`profile not found: ${profile}`);
  const viewerDir = path.resolve(spec.viewer_dir || process.env.FATHOM_FIREFOX_PROFILER_DIR ||
                                 path.join(REPO, '..', 'shared', 'viewers', 'firefox-profiler'));
  if (!fs.existsSync(path.join(viewerDir, 'index.html'))) throw new Error(`no Firefox Profiler build at ${viewerDir}`);
  const chromium = chromiumPath(spec);
  const shotDir = screenshotDir(spec);
  const prefix = (spec.name || path.basename(profile).replace(/\.json(\.gz)?$/, '')).replace(/[^A-Za-z0-9._-]/g, '_');
  const maxRows = spec.max_rows || 3000;

  out.profile = profile;
  // A file we cannot read still goes to the page: what it shows for it is the point.
  try {
    out.file_threads = fileThreads(profile);
  } catch (e) {
    out.file_error = e.message;
  }
  const byName = (name) => {
    const t = out.file_threads.find((x) => x.name === name);
    if (!t) throw new Error(`no thread named ${JSON.stringify(name)} in the file (${out.file_threads.map((x) => x.name).join(', ')})`);
    return t.index;
  };
  let wanted = spec.threads ? spec.threads.map((t) => (typeof t === 'number' ? t : byName(t))) : null;

  const app = await serveApp(viewerDir);
  const files = await serveProfile(profile);
  state.servers.push(app, files);
  const appBase = `http://127.0.0.1:${app.address().port}`;
  const profileUrl = `http://127.0.0.1:${files.address().port}/${encodeURIComponent(path.basename(profile))}`;

  const browser = await launchBrowser(chromium, state);
  out.browser = await browser.version();
  const page = await browser.newPage();
  // The app's service worker would cache the app between runs (and across
  // the random ports nothing would match anyway): keep every load fresh.
  await page.setBypassServiceWorker(true);
  // Our own getImageData reads of the track canvases make Chromium warn
  // about willReadFrequently: that is the harness, not the profile.
  watchPage(page, () => out, /willReadFrequently/);

  const firstThread = wanted && wanted.length ? wanted[0] : null;
  const query = (thread) => {
    const q = new URLSearchParams();
    if (thread !== null && thread !== undefined) q.set('thread', String(thread));
    if (spec.ct_summary) q.set('ctSummary', spec.ct_summary);
    const s = q.toString();
    return s ? `?${s}` : '';
  };
  const url = `${appBase}/from-url/${encodeURIComponent(profileUrl)}/calltree/${query(firstThread)}`;
  out.url = url;

  const t0 = Date.now();
  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 20000 });
  // Tracks, or the app's error page.
  const settled = await page.waitForFunction(() => {
    if (document.querySelector('.timelineTrack')) return 'tracks';
    const boundary = document.querySelector('.appErrorBoundary');
    if (boundary) return `error: ${boundary.innerText}`;
    const msg = document.querySelector('.rootMessage');
    if (msg && /error|couldn|could not|unable|fail|invalid|not supported/i.test(msg.innerText)) return `error: ${msg.innerText}`;
    return false;
  }, { timeout: 30000, polling: 100 }).then((h) => h.jsonValue()).catch((e) => `error: no tracks within 30 s (${e.message})`);
  out.title = await page.title();
  if (settled !== 'tracks') {
    const shot = path.join(shotDir, `${prefix}-error.png`);
    await page.screenshot({ path: shot });
    out.screenshots.push(shot);
    throw new Error(`the Firefox Profiler did not show the profile: ${settled.replace(/^error: /, '').replace(/\s+/g, ' ').trim()}`);
  }
  out.timings.load_ms = Date.now() - t0;

  // Show every track: the timeline starts at most 270 px tall, and tracks
  // scrolled out of it are not drawn. Same as dragging its splitter down.
  await page.evaluate(() => {
    const outer = document.querySelector('.resizableWithSplitterOuter');
    const list = document.querySelector('.timelineThreadList');
    if (outer && list) outer.style.maxHeight = `${list.scrollHeight + 80}px`;
  });
  await sleep(300);
  // The activity graphs are drawn after layout: wait until their pixel counts stop changing.
  let tracks = await page.evaluate(pageTracks);
  for (let i = 0; i < 20; i++) {
    await sleep(100);
    const again = await page.evaluate(pageTracks);
    const same = JSON.stringify(again.map((t) => t.activity_pixels)) === JSON.stringify(tracks.map((t) => t.activity_pixels));
    tracks = again;
    if (same && i >= 1) break;
  }
  out.track_count_text = await page.$eval('.timelineSettingsHiddenTracks', (el) => el.innerText.replace(/[\u2068\u2069]/g, '').replace(/\s+/g, ' ').trim()).catch(() => null);
  const overview = path.join(shotDir, `${prefix}-timeline.png`);
  await page.screenshot({ path: overview });
  out.screenshots.push(overview);

  // Which thread each track shows: select it as a user would (a click on
  // its name) and read the thread the URL now names.
  const buttons = await page.$$('.timelineTrackRow');
  for (let i = 0; i < tracks.length; i++) {
    const t = tracks[i];
    t.thread_index = null;
    if (t.kind !== 'thread') continue;
    const button = await buttons[i].$('.timelineTrackNameButton');
    if (!button) continue;
    await button.click();
    await sleep(50);
    const thread = await page.evaluate(() => new URL(location.href).searchParams.get('thread'));
    t.thread_index = thread !== null && /^\d+$/.test(thread) ? Number(thread) : thread;
  }
  out.tracks = tracks.filter((t) => t.kind === 'thread');
  out.other_tracks = tracks.filter((t) => t.kind !== 'thread');
  out.track_menu = await trackMenu(page);
  out.hidden_tracks = out.track_menu ? out.track_menu.filter((t) => !t.shown).map((t) => t.name) : null;
  out.timings.tracks_ms = Date.now() - t0;

  if (!wanted) wanted = out.tracks.map((t) => t.thread_index).filter((x) => typeof x === 'number');
  for (const index of wanted) {
    out.threads[index] = await inspectThread(page, index, { tracks, buttons, shotDir, prefix, maxRows, appBase, profileUrl, query });
  }
}

// The "N / M tracks" menu: every track it lists, whether it is shown (the
// app hides some by itself, e.g. threads it finds idle).
async function trackMenu(page) {
  const button = await page.$('.timelineSettingsHiddenTracks');
  if (!button) return null;
  await button.click();
  await page.waitForSelector('.timelineTrackContextMenu .react-contextmenu-item.checkable', { timeout: 2000 }).catch(() => null);
  const items = await page.evaluate(() =>
    [...document.querySelectorAll('.timelineTrackContextMenu .react-contextmenu-item.checkable')]
      .map((el) => ({
        name: el.innerText.replace(/\s+/g, ' ').trim(),
        shown: el.classList.contains('checked'),
        local: el.classList.contains('indented'),
      })));
  await page.keyboard.press('Escape');
  await sleep(100);
  return items;
}

async function inspectThread(page, index, ctx) {
  const result = { thread_index: index };
  const pos = ctx.tracks.findIndex((t) => t.thread_index === index);
  if (pos >= 0) {
    result.track_name = ctx.tracks[pos].name;
    const button = await ctx.buttons[pos].$('.timelineTrackNameButton');
    await button.click();
  } else {
    // No visible track (hidden or absent): open its URL as a link would.
    result.track_name = null;
    await page.goto(`${ctx.appBase}/from-url/${encodeURIComponent(ctx.profileUrl)}/calltree/${ctx.query(index)}`,
                    { waitUntil: 'domcontentloaded' });
    await page.waitForSelector('.timelineTrack', { timeout: 20000 });
  }
  // The Call Tree tab.
  const tab = await page.$('#calltree-tab-button');
  if (tab) await tab.click();
  await page.waitForSelector('.treeViewBody', { timeout: 5000 }).catch(() => null);
  await sleep(150);
  result.url = page.url();
  result.selected_thread = await page.evaluate(() => new URL(location.href).searchParams.get('thread'));
  result.empty_message = await page.$eval('.treeViewBody', () => null).catch(async () =>
    page.$eval('.emptyReasons, .calltreeEmptyReasons, [class*="EmptyReasons"]', (el) => el.innerText.trim()).catch(() => 'no call tree'));

  // Open the sidebar if it is closed.
  const closed = await page.$('.sidebar-open-close-button-isclosed');
  if (closed) { await closed.click(); await sleep(150); }

  // Expand everything: select each root (last first, so that expanding one
  // does not move the next) and press "*", which toggles "expand all
  // descendants"; pressed on an already expanded root it collapses them
  // all, so then press it once more.
  const sidebars = [];
  let scan = await page.evaluate(pageTreeRows, ctx.maxRows);
  const roots = scan.rows.filter((r) => r.level === 1);
  for (const root of [...roots].reverse()) {
    const id = await page.evaluate(pageShowRow, root.pos);
    if (!id) continue;
    const name = await page.$(`#${id} .treeViewMainColumn`);
    if (!name) continue;
    await name.click();
    if (root.expanded !== null) {
      await page.focus('.treeViewBody');
      await page.keyboard.press('*');
      await sleep(30);
      const expanded = await page.$eval(`#${id}`, (el) => el.getAttribute('aria-expanded')).catch(() => null);
      if (expanded === 'false') {
        await page.keyboard.press('*');
        await sleep(30);
      }
    }
    await sleep(50);
    const sidebar = await page.evaluate(pageSidebar);
    if (sidebar) sidebars.unshift(sidebar);
  }
  // Leave the first root selected, as the app does.
  if (roots.length) {
    const id = await page.evaluate(pageShowRow, 0);
    const name = id && await page.$(`#${id} .treeViewMainColumn`);
    if (name) await name.click();
    await sleep(50);
  }
  scan = await page.evaluate(pageTreeRows, ctx.maxRows);
  result.calltree_rows = scan.rows.map(({ id, ...r }) => r);
  result.calltree_total_rows = scan.total;
  result.calltree_truncated = scan.total > scan.rows.length;
  result.calltree_text = scan.rows
    .map((r) => `${'  '.repeat(Math.max(0, r.level - 1))}${r.name}  [${[r.total_percent, r.total, `self ${r.self}`, r.category].filter((x) => x).join(' ')}]`)
    .join('\n');
  result.sidebar = sidebars;
  result.sidebar_text = sidebars.map((s) => `${s.node}\n${s.text}`).join('\n');

  const shot = path.join(ctx.shotDir, `${ctx.prefix}-calltree-thread${index}.png`);
  await page.screenshot({ path: shot });
  result.screenshot = shot;
  return result;
}

const out = {
  ok: false,
  profile: null,
  url: null,
  title: null,
  browser: null,
  file_threads: [],
  track_count_text: null,
  tracks: [],
  other_tracks: [],
  track_menu: null,
  hidden_tracks: null,
  threads: {},
  console_errors: [],
  console_warnings: [],
  page_errors: [],
  failed_requests: [],
  screenshots: [],
  timings: {},
};
run('firefox_view.js', out, main, { fromArg: (arg) => ({ profile: arg }) });

// Opens a flame graph written by `fathom report FILE --format html` in
// headless Chromium, from file:// and with every other request refused (the
// page must need nothing from the network), and reports what it shows:
//
//   spec:   {file, search, zoom, screenshot_dir?, chromium?, timeout_ms?}
//   report: {ok, title, names: [text of every drawn frame], summary,
//            requests: [every URL the page asked for], blocked: [those refused],
//            page_errors, console_errors, found (the search's line),
//            matched (frames marked by the search), crumbs (after clicking
//            the frame named `zoom`), zoomed_names, screenshots, timings}
//
// Run by test/viewers/flame_html_test.rb through test/support/browser_run.rb.
'use strict';

const path = require('path');
const { sleep, chromiumPath, screenshotDir, launchBrowser, watchPage, run } = require('./harness');

async function main(spec, out, state) {
  const file = path.resolve(spec.file);
  const url = `file://${file}`;
  const browser = await launchBrowser(chromiumPath(spec), state);
  const page = await browser.newPage();
  Object.assign(out, { requests: [], blocked: [], page_errors: [], console_errors: [], console_warnings: [],
                       failed_requests: [], screenshots: [] });
  watchPage(page, () => out);
  // Only the file itself may load: anything else (a script or font from a
  // CDN, a fetch) is refused and recorded.
  await page.setRequestInterception(true);
  page.on('request', (req) => {
    out.requests.push(req.url());
    if (req.url() === url || req.url().startsWith('data:')) req.continue();
    else {
      out.blocked.push(req.url());
      req.abort();
    }
  });
  const started = Date.now();
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForSelector('#graph .node', { timeout: 20000 });
  out.timings.load_ms = Date.now() - started;
  const read = () => page.evaluate(() => ({
    title: document.title,
    names: Array.from(document.querySelectorAll('#graph .node')).map((n) => n.textContent).filter((t) => t),
    summary: document.getElementById('summary').textContent,
    found: document.getElementById('found').textContent,
    matched: document.querySelectorAll('#graph .node.match').length,
    crumbs: document.getElementById('crumbs').textContent,
    types: Array.from(document.querySelectorAll('#type option')).map((o) => o.textContent),
  }));
  Object.assign(out, await read());
  const dir = screenshotDir(spec);
  const shot = async (name) => {
    const png = path.join(dir, `${name}.png`);
    await page.screenshot({ path: png, fullPage: true });
    out.screenshots.push(png);
  };
  await shot('flame-html');

  if (spec.search) {
    await page.type('#search', spec.search);
    await sleep(200);
    const searched = await read();
    out.found = searched.found;
    out.matched = searched.matched;
    await page.evaluate(() => {
      const box = document.getElementById('search');
      box.value = '';
      box.dispatchEvent(new Event('input'));
    });
  }
  if (spec.zoom) {
    const clicked = await page.evaluate((name) => {
      const node = Array.from(document.querySelectorAll('#graph .node')).find((n) => n.textContent === name);
      if (!node) return false;
      node.click();
      return true;
    }, spec.zoom);
    out.zoom_clicked = clicked;
    await sleep(200);
    const zoomed = await read();
    out.crumbs = zoomed.crumbs;
    out.zoomed_names = zoomed.names;
    await shot('flame-html-zoomed');
  }
}

run('flame_html_view.js', { timings: {} }, main);

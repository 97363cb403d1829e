// Counts the results of the HTTP cache test suite (cache-tests.fyi) by kind, the way the
// suite's own pages classify them (lib/display.mjs in the suite: a test whose dependency did
// not pass is a dependency failure; a failed "optimal" test is optional; a "check" is Y/N).
// Rewritten here because the suite's module loads browser-only assets.
//
//   node summarise.mjs SUITE_DIR NAME=results.json [NAME=results.json ...] [--published [--goal]]
//
// Prints a table of counts per result file (and, with --published, per result file the suite
// ships in SUITE_DIR/results), then for each run the ids of required failures, the tests a
// run named "nginx" passes that each other run does not, and with --goal whether the first
// run is ahead of every published cache (exit status 1 if not). The last line, prefixed
// "json: ", is the table as JSON for programs.
import fs from 'fs'
import path from 'path'

const [suiteDir, ...rest] = process.argv.slice(2)
if (!suiteDir) {
  console.error('usage: node summarise.mjs SUITE_DIR NAME=results.json ... [--published]')
  process.exit(2)
}
const published = rest.includes('--published')
const goal = rest.includes('--goal') && published
const runs = rest.filter(a => !a.startsWith('--')).map(a => {
  const eq = a.indexOf('=')
  if (eq < 1) throw new Error(`expected NAME=FILE, got ${a}`)
  return { name: a.slice(0, eq), results: JSON.parse(fs.readFileSync(a.slice(eq + 1), 'utf8')) }
})

const suites = (await import(path.resolve(suiteDir, 'tests/index.mjs'))).default
const surrogate = (await import(path.resolve(suiteDir, 'tests/surrogate-control.mjs'))).default
// The command-line client runs the surrogate tests too; so do we.
const allSuites = [...suites, surrogate]
const tests = new Map()
for (const suite of allSuites) {
  for (const test of suite.tests) {
    if (test.browser_only === true) continue
    tests.set(test.id, test)
  }
}

const KINDS = ['pass', 'fail', 'optional_fail', 'yes', 'no', 'setup_fail', 'harness_fail', 'dependency_fail', 'retry', 'untested']

function classify (id, results, seen = new Set()) {
  const test = tests.get(id)
  const result = results[id]
  if (result === undefined) return 'untested'
  if (test && test.depends_on !== undefined && !seen.has(id)) {
    seen.add(id)
    for (const dep of test.depends_on) {
      const d = classify(dep, results, seen)
      if (d !== 'pass' && d !== 'yes') return 'dependency_fail'
    }
  }
  if (Array.isArray(result) && result[0] === 'Setup') {
    return result[1] === 'retry' ? 'retry' : 'setup_fail'
  }
  const kind = test ? test.kind : undefined
  if (kind === 'optimal') return result === true ? 'pass' : 'optional_fail'
  if (kind === 'check') return result === true ? 'yes' : 'no'
  return result === true ? 'pass' : 'fail'
}

function summarise (results) {
  const counts = Object.fromEntries(KINDS.map(k => [k, 0]))
  const byId = {}
  for (const id of tests.keys()) {
    const k = classify(id, results)
    counts[k]++
    byId[id] = k
  }
  return { counts, byId }
}

const rows = runs.map(r => ({ name: r.name, ...summarise(r.results) }))
if (published) {
  const index = (await import(path.resolve(suiteDir, 'results/index.mjs'))).default
  for (const item of index) {
    if (item.type === 'browser') continue
    const results = JSON.parse(fs.readFileSync(path.resolve(suiteDir, 'results', item.file), 'utf8'))
    rows.push({ name: `${item.name} ${item.version} (published)`, ...summarise(results) })
  }
}

const short = { pass: 'pass', fail: 'required fail', optional_fail: 'optional fail', yes: 'check Y', no: 'check N', setup_fail: 'setup fail', harness_fail: 'harness fail', dependency_fail: 'dep fail', retry: 'retry', untested: 'untested' }
const width = Math.max(...rows.map(r => r.name.length), 10)
console.log(`${tests.size} tests (browser-only ones left out)`)
console.log(''.padEnd(width) + KINDS.map(k => short[k].padStart(14)).join(''))
for (const r of rows) {
  console.log(r.name.padEnd(width) + KINDS.map(k => String(r.counts[k]).padStart(14)).join(''))
}
for (const r of runs.map((_, i) => rows[i])) {
  const failing = Object.entries(r.byId).filter(([, k]) => k === 'fail' || k === 'setup_fail' || k === 'harness_fail').map(([id, k]) => k === 'fail' ? id : `${id} (${k})`)
  console.log(`\n${r.name}: ${failing.length} required, setup or harness failures`)
  for (const id of failing) {
    const raw = runs.find(x => x.name === r.name).results[id]
    const why = Array.isArray(raw) ? raw[1] : ''
    console.log(`  ${id}${why ? ': ' + why : ''}`)
  }
}
const nginx = rows.slice(0, runs.length).find(r => r.name === 'nginx')
if (nginx) {
  for (const a of rows.slice(0, runs.length).filter(r => r !== nginx)) {
    const worse = Object.keys(a.byId).filter(id => nginx.byId[id] === 'pass' && a.byId[id] !== 'pass')
    console.log(`\n${a.name} does not pass ${worse.length} test(s) that nginx passes${worse.length ? ':' : ''}`)
    for (const id of worse) console.log(`  ${id}: ${a.byId[id]}`)
  }
}
if (goal) {
  // The goal, against whichever results this release of the suite publishes: more
  // passes than the best published cache, fewer required failures than the fewest, and no
  // test failed that nginx (run here) passes.
  const pub = rows.slice(runs.length)
  const ours = rows[0]
  const best = pub.reduce((b, r) => (r.counts.pass > b.counts.pass ? r : b), pub[0])
  const fewest = pub.reduce((b, r) => (r.counts.fail < b.counts.fail ? r : b), pub[0])
  const lines = [
    [`passes ${ours.counts.pass} > ${best.counts.pass} (${best.name})`, ours.counts.pass > best.counts.pass],
    [`required failures ${ours.counts.fail} < ${fewest.counts.fail} (${fewest.name})`, ours.counts.fail < fewest.counts.fail]
  ]
  if (nginx) {
    const worse = Object.keys(ours.byId).filter(id => nginx.byId[id] === 'pass' && ours.byId[id] !== 'pass').length
    lines.push([`tests nginx passes that ${ours.name} does not: ${worse}`, worse === 0])
  }
  console.log(`\ngoal, for ${ours.name}:`)
  for (const [text, met] of lines) console.log(`  ${met ? 'met    ' : 'NOT MET'}  ${text}`)
  if (lines.some(([, met]) => !met)) process.exitCode = 1
}
console.log('json: ' + JSON.stringify(rows.map(r => ({ name: r.name, counts: r.counts, byId: r.byId }))))
